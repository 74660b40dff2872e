#!/usr/bin/env bash
# Runs inside the Debian 12 VM of ../shared/vm (systemd, cgroup v2): the
# cgroup crate's live-job tests (cgroup/tests/live_v2.rs) against real v2
# controllers. Expects the test binary `live_v2` next to this script.
#
# A test process cannot enable controllers for cgroups below its own (the
# no-internal-processes rule), so this scope does what systemd and the
# supervisor do: move itself into a leaf, enable memory, pids and cpu, and
# hand the tests a parent with them enabled.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec systemd-run --scope -q -p Delegate=yes bash -c '
  set -euo pipefail
  own=/sys/fs/cgroup$(sed -n "s/^0:://p" /proc/self/cgroup)
  mkdir "$own/runner" "$own/jobs"
  echo $$ > "$own/runner/cgroup.procs"
  echo "+memory +pids +cpu" > "$own/cgroup.subtree_control"
  echo "+memory +pids +cpu" > "$own/jobs/cgroup.subtree_control"
  echo "kernel $(uname -r), jobs parent $own/jobs"
  PRIMS_CGROUP_TEST_V2_PARENT=$own/jobs exec "$1" --test-threads=1
' cgroup-v2 "$here/live_v2"
