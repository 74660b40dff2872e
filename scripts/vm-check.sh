#!/usr/bin/env bash
# Runs the jail against the cgroup v2 backend in the throw-away Debian 12 VM
# of ../shared/vm (systemd, cgroup v2, Landlock ABI 2). This build machine is
# cgroup v1, so this is where v2 is exercised for real.
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

cargo build --release --locked -p prims -p prims-jailer
share=$(mktemp -d)
trap 'rm -rf "$share"' EXIT
cp target/release/prims target/release/prims-jailer tests/vm/jail-v2.sh "$share/"
echo "== jail-v2.sh in the VM"
"$vm/run-in-vm.sh" -t 900 "$share" 'bash ./jail-v2.sh'
