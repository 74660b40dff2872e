#!/usr/bin/env bash
# Checks PRIMS on a production-like host: the throw-away Debian 12 VM of
# ../shared/vm (systemd 252, cgroup v2, kernel 6.1, Landlock ABI 2). This
# build machine is cgroup v1, so this is where the v2 backend, the systemd
# units and the .deb run for real. One boot (with a network) runs:
#   tests/vm/jail-v2.sh      `prims run` against the v2 backend (limits, OOM,
#                            pids), cold and forked from a fork template
#   tests/vm/cgroup-v2.sh    the cgroup crate's live-job tests on v2 controllers
#   tests/vm/catalogue-v2.sh test executables built here, run there: the
#                            escape catalogue and limits in forked mode, and
#                            kernel_budgets in both modes
#   tests/vm/deb-systemd.sh  the .deb, both services, an MCP smoke test with
#                            the Python SDK, a supervisor restart, policy reload
# PRIMS_VM_E2E chooses what catalogue-v2.sh runs: "catalogue kernel_budgets"
# (the default), either one, or "none"; the rest says SKIPPED. The VM
# emulates its CPU (TCG) where KVM is unusable, as on the build machine:
# there the catalogue takes about 5 minutes and kernel_budgets about 4.
# Prints a SKIPPED line with the reason when the VM cannot run here, and the
# VM's times last.
set -euo pipefail
cd "$(dirname "$0")/.."
vm=${PRIMS_VM_DIR:-../shared/vm}
read -r -a e2e <<<"${PRIMS_VM_E2E:-catalogue kernel_budgets}"
case " ${e2e[*]} " in
  " none ") e2e=() ;;
  *) for p in "${e2e[@]}"; do
       case $p in
         catalogue | kernel_budgets) ;;
         *) echo "vm-check: PRIMS_VM_E2E=${PRIMS_VM_E2E}: catalogue, kernel_budgets or none" >&2; exit 2 ;;
       esac
     done ;;
esac
for p in catalogue kernel_budgets; do
  [[ " ${e2e[*]} " == *" $p "* ]] ||
    echo "vm-check: catalogue-v2.sh $p SKIPPED (PRIMS_VM_E2E=${PRIMS_VM_E2E:-})"
done

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
target=${CARGO_TARGET_DIR:-target}
# test_exes ARGS...: `cargo test ARGS --no-run`, printing "name path" for
# each test executable it built.
test_exes() {
  cargo test "$@" --no-run --locked --message-format=json |
    python3 -c 'import json, sys
for m in map(json.loads, sys.stdin):
    if m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["target"]["name"], m["executable"])'
}
live_v2=$(test_exes -p prims-cgroup --test live_v2 | awk '$1 == "live_v2" {print $2}')
tests/mcp/setup.sh >/dev/null
site=$("$target/mcp-test-venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
share=$(mktemp -d)
trap 'rm -rf "$share"' EXIT
cp "$target/release/prims" "$target/release/prims-jailer" "$deb" \
  tests/vm/jail-v2.sh tests/vm/deb-systemd.sh tests/vm/mcp_smoke.py "$share/"
cp "$live_v2" "$share/live_v2" && cp tests/vm/cgroup-v2.sh "$share/"
cp -a "$site" "$share/mcp-site"

if [ "${#e2e[@]}" -gt 0 ]; then
  # The escape catalogue (every escape_*.rs, and limits: OOM, pids.max,
  # CPU and wall on v2), and the kernel budgets, as chosen. bad_input and
  # happy check no kernel interface and run on the build host alone.
  names=()
  if [[ " ${e2e[*]} " == *" catalogue "* ]]; then
    for f in tests/tests/escape_*.rs tests/tests/limits.rs; do
      names+=("$(basename "$f" .rs)")
    done
  fi
  [[ " ${e2e[*]} " == *" kernel_budgets "* ]] && names+=(kernel_budgets)
  args=()
  for t in "${names[@]}"; do args+=(--test "$t"); done
  built=$(test_exes -p prims-tests "${args[@]}")
  mkdir "$share/catalogue"
  for t in "${names[@]}"; do
    exe=$(awk -v t="$t" '$1 == t {print $2}' <<<"$built")
    [ -n "$exe" ] || { echo "vm-check: cargo built no test executable $t" >&2; exit 1; }
    if [ "$t" = kernel_budgets ]; then cp "$exe" "$share/$t"; else cp "$exe" "$share/catalogue/$t"; fi
  done
  # The IPython layer the tests' interpreters bind, for the VM's python 3.11.
  scripts/ipython-site.sh >/dev/null
  tar -C "${PRIMS_IPYTHON_SITE:-/var/lib/prims-tests/ipython-site}" -cf "$share/ipython-site.tar" .
  # The checkout the tests were built in, which no jail may see or name.
  pwd > "$share/checkout"
  tar -cf "$share/checkout-tests.tar" tests/Cargo.toml tests/src tests/tests
  cp tests/vm/catalogue-v2.sh "$share/"
fi

steps="jail-v2 cgroup-v2${e2e[*]:+ catalogue-v2} deb-systemd"
echo "== in the VM: ${steps// /, }"
# --net: the escape tests' host-side pairs need a network (catalogue-v2.sh).
rc=0
"$vm/run-in-vm.sh" --net -t 3600 "$share" "
  rc=0
  for s in $steps; do
    echo \"### \$s.sh\"; t0=\$(date +%s)
    if [ \$s = catalogue-v2 ]; then bash ./\$s.sh ${e2e[*]}; else bash ./\$s.sh; fi
    r=\$?; echo \"### \$s.sh: exit \$r in \$((\$(date +%s) - t0)) s\"; rc=\$((rc || r))
  done
  exit \$rc" || rc=$?
echo "== VM time: $(tr '\n' ' ' < "$share/result/timing" 2>/dev/null)"
exit $rc
