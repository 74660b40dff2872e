#!/usr/bin/env bash
# Runs inside the Debian 12 VM of ../shared/vm (systemd 252, cgroup v2,
# kernel 6.1, Landlock ABI 2): end-to-end test executables of tests/tests,
# built on the host and shipped here, against the v2 backend.
#   catalogue-v2.sh [catalogue] [kernel_budgets]    (default: both)
#   catalogue       catalogue/*: the escape catalogue and limits, in the
#                   default forked mode (`prims run --live
#                   --forked`; the other modes run on the build host)
#   kernel_budgets  real supervisors, each budget in both modes
# Expects next to it: prims, prims-jailer, ipython-site.tar (the layer of
# scripts/ipython-site.sh, made for this python's version), catalogue/ and
# kernel_budgets as chosen, and checkout + checkout-tests.tar (below).
# Prints one PASS/FAIL line per test executable run, and each failed test's
# output; a chosen executable that is missing fails.
#
# What the tests take from their host, as on the build host: a network
# (the VM boots with --net: the escape tests pair each refusal in the jail
# with the same call working on the host, to its own address and its
# nameserver), and the checkout they were built in (CARGO_MANIFEST_DIR),
# which no jail may see or name: its tests/ directory is unpacked at the
# same path here.
#
# Where the binaries go: the tests find prims and prims-jailer in
# $PRIMS_TEST_BIN_DIR. There `prims` starts the real one in a transient
# scope of its own with Delegate=yes, as a v2 host runs `prims run`
# (`systemd-run --scope -p Delegate=yes`) and a supervisor (a Delegate=yes
# unit): a v2 cgroup that holds processes cannot hand controllers to job
# cgroups, so neither could work from the test process's own cgroup. The
# real prims finds the very prims-jailer the tests name (PRIMS_JAILER), so
# the checks that no jail names the jailer's host path look for the one
# that runs.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=/opt/prims-tests/bin
real=/opt/prims-tests/real
site=/var/lib/prims-tests/ipython-site
fails=0
fail() { echo "FAIL $1"; fails=$((fails+1)); }
chosen=("$@")
[ "${#chosen[@]}" -gt 0 ] || chosen=(catalogue kernel_budgets)
for c in "${chosen[@]}"; do
  case $c in
    catalogue | kernel_budgets) ;;
    *) fail "catalogue_v2: unknown part $c (catalogue, kernel_budgets)"; exit 1 ;;
  esac
done
wants() { [[ " ${chosen[*]} " == *" $1 "* ]]; }

echo "kernel $(uname -r), cgroup fs $(stat -fc %T /sys/fs/cgroup)," \
  "Landlock ABI $(python3 -c 'import ctypes; print(ctypes.CDLL(None).syscall(444, None, 0, 1))')," \
  "$(python3 --version), $(nproc) CPUs, $(free -m | awk '/^Mem:/ {print $2}') MiB; running: ${chosen[*]}"
# What the tests need here; a missing one fails the stage, loudly.
[ "$(id -u)" = 0 ] || { fail "catalogue_v2_prerequisites: not root"; exit 1; }
[ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ] ||
  { fail "catalogue_v2_prerequisites: /sys/fs/cgroup is not cgroup v2"; exit 1; }
command -v mkfs.ext4 >/dev/null ||
  { fail "catalogue_v2_prerequisites: no mkfs.ext4 (e2fsprogs) for session images"; exit 1; }
for _ in $(seq 1 60); do
  [ -n "$(ip -4 route show default)" ] && grep -q '^nameserver ' /etc/resolv.conf && break
  sleep 1
done
if [ -z "$(ip -4 route show default)" ]; then
  fail "catalogue_v2_prerequisites: no network (run-in-vm.sh --net) for the escape tests' host-side pairs"
  exit 1
fi
echo "network: $(ip -4 -o addr show scope global | awk '{print $2, $4}'), $(grep -m1 '^nameserver ' /etc/resolv.conf)"
repo=$(cat "$here/checkout")
install -d "$repo"
tar -C "$repo" -xf "$here/checkout-tests.tar"

install -d "$bin" "$real"
install -m 0755 "$here/prims" "$real/prims"
install -m 0755 "$here/prims-jailer" "$bin/prims-jailer"
cat > "$bin/prims" <<EOF
#!/bin/sh
# prims in a delegated scope of its own (tests/vm/catalogue-v2.sh says why).
PRIMS_JAILER=$bin/prims-jailer exec systemd-run --scope --quiet --collect -p Delegate=yes $real/prims "\$@"
EOF
chmod 0755 "$bin/prims"

rm -rf "$site" && install -d "$site"
tar -C "$site" -xf "$here/ipython-site.tar"
want=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
have=$(cut -d' ' -f1 "$site/.prims-ipython-site" 2>/dev/null)
if [ "$have" != "$want" ]; then
  fail "catalogue_v2_prerequisites: the IPython layer is for python ${have:-?}, this python3 is $want"
  exit 1
fi

# run NAME THREADS EXECUTABLE [ARGS...]: one test executable (ARGS are
# libtest's: a filter, --skip), the environment set by the caller.
run() {
  local name=$1 threads=$2 exe=$3 log t0 secs rc result
  shift 3
  log=$(mktemp "/var/tmp/$name.XXXX.log")
  t0=$(date +%s)
  PRIMS_TEST_BIN_DIR="$bin" RUST_BACKTRACE=0 \
    timeout 2400 "$exe" --test-threads="$threads" "$@" > "$log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - t0 ))
  result=$(grep -E '^test result:' "$log" | tail -1)
  if [ "$rc" = 0 ] && [ -n "$result" ] && ! grep -q ' 0 passed;' <<<"$result"; then
    echo "PASS $name ($secs s): ${result#test result: }"
  else
    fail "$name (exit $rc, $secs s): ${result:-no test result line}"
    # The failed tests' own output, else the end of the log.
    if grep -q '^failures:$' "$log"; then
      sed -n '/^failures:$/,$p' "$log"
    else
      tail -n 60 "$log"
    fi
  fi
}

shopt -s nullglob
if wants catalogue; then
  catalogue=("$here"/catalogue/*)
  [ "${#catalogue[@]}" -gt 0 ] || fail "catalogue: no test executables in $here/catalogue"
  t0=$(date +%s)
  for exe in "${catalogue[@]}"; do
    PRIMS_TEST_MODE=forked run "$(basename "$exe")" 2 "$exe"
  done
  echo "catalogue (forked mode): $(( $(date +%s) - t0 )) s"
fi
if wants kernel_budgets; then
  t0=$(date +%s)
  if [ -x "$here/kernel_budgets" ]; then
    # The two inotify-watches tests hold 40 sessions each (enough to share
    # out the host's max_user_watches, which the supervisor raises): more
    # than this VM's 2 GiB and emulated CPU hold (cold starts pass the
    # supervisor's 120 s). They run on the build host.
    run kernel_budgets 2 "$here/kernel_budgets" --skip inotify_watches
    echo "SKIPPED kernel_budgets inotify_watches: 40 sessions do not fit this VM; scripts/test.sh runs them on the build host"
  else
    fail "kernel_budgets: no test executable $here/kernel_budgets"
  fi
  echo "kernel_budgets: $(( $(date +%s) - t0 )) s"
fi
df -h / | sed 's/^/disk: /'
echo "$fails failed"
exit $((fails > 0))
