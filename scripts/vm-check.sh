#!/usr/bin/env bash
# Checks PRIMS on a production-like host: the throw-away Debian 12 VM of
# ../shared/vm (systemd 252, cgroup v2, Landlock ABI 2). This build machine is
# cgroup v1, so this is where the v2 backend, the systemd units and the .deb
# run for real. One boot runs:
#   tests/vm/jail-v2.sh     `prims run` against the v2 backend (limits, OOM, pids),
#                           cold and forked from a fork template
#   tests/vm/cgroup-v2.sh   the cgroup crate's live-job tests on v2 controllers
#   tests/vm/deb-systemd.sh the .deb, both services, an MCP smoke test with the
#                           Python SDK, a supervisor restart, policy reload
# Prints a SKIPPED line with the reason when the VM cannot run here.
set -euo pipefail
cd "$(dirname "$0")/.."
vm=${PRIMS_VM_DIR:-../shared/vm}

if [ ! -x "$vm/run-in-vm.sh" ]; then
  echo "vm-check: SKIPPED: no VM harness at $vm (set PRIMS_VM_DIR)"
  exit 0
fi
if ! command -v qemu-system-x86_64 >/dev/null || ! command -v debootstrap >/dev/null; then
  echo "== apt-get install qemu-system-x86 debootstrap e2fsprogs"
  apt-get update -q >/dev/null
  apt-get install -y -q qemu-system-x86 debootstrap e2fsprogs >/dev/null
fi
echo "== building the VM image (a no-op when it is up to date)"
"$vm/build-image.sh"

deb=$(packaging/build-deb.sh | tail -1)
live_v2=$(cargo test -p prims-cgroup --test live_v2 --no-run --locked --message-format=json |
  python3 -c 'import json, sys
print(next(m["executable"] for m in map(json.loads, sys.stdin) if m.get("executable") and m["target"]["name"] == "live_v2"))')
tests/mcp/setup.sh >/dev/null
site=$(target/mcp-test-venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
share=$(mktemp -d)
trap 'rm -rf "$share"' EXIT
cp target/release/prims target/release/prims-jailer "$deb" \
  tests/vm/jail-v2.sh tests/vm/deb-systemd.sh tests/vm/mcp_smoke.py "$share/"
cp "$live_v2" "$share/live_v2" && cp tests/vm/cgroup-v2.sh "$share/"
cp -a "$site" "$share/mcp-site"
echo "== in the VM: jail-v2.sh, cgroup-v2.sh, then deb-systemd.sh"
"$vm/run-in-vm.sh" -t 1200 "$share" \
  'echo "### jail-v2.sh"; bash ./jail-v2.sh; a=$?; echo "### cgroup-v2.sh"; bash ./cgroup-v2.sh; c=$?; echo "### deb-systemd.sh"; bash ./deb-systemd.sh; b=$?; exit $((a || b || c))'
