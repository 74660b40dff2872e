#!/usr/bin/env bash
# The whole PRIMS test suite: lint, build, and every test against the real
# kernel. Needs root (namespaces, cgroups, id maps). `.ci/run` calls this.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/test.sh: the jail tests need root (namespaces, cgroups, id maps); run it with sudo" >&2
  exit 1
fi

scripts/install-deps.sh
. scripts/toolchain.sh
# The IPython layer (IPython, matplotlib) the tests' jails share.
scripts/ipython-site.sh
# A fresh clone gains nothing from incremental builds but gigabytes of disk.
export CARGO_INCREMENTAL=0

# Session images, venvs and the build share one disk; say how much there is,
# so that a run cut short by ENOSPC says so at once.
disk() { df -h --output=avail,target . /var/tmp | sed 1d | sort -u | awk -v s="$1" '{printf "disk %s: %s free on %s\n", s, $1, $2}'; }
disk start
summary() { disk end; echo "cargo-test: $1 passed, $2 failed"; }

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== ruff (the agent's Python, which runs in the jail)"
scripts/lint-python.sh
echo "== cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== cargo doc (warnings are errors: a broken intra-doc link fails the run)"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace --locked
echo "== cargo build"
cargo build --workspace --all-targets --locked
disk "after the build"
echo "== cargo test (the escape catalogue in forked interpreters, as the server starts them)"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
cargo test --workspace --locked --no-fail-fast -- --test-threads="${PRIMS_TEST_THREADS:-4}" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
passed=$(awk '/^test result:/ {p += $4} END {print p + 0}' "$log")
failed=$(awk '/^test result:/ {f += $6} END {print f + 0}' "$log")
[ "$status" -eq 0 ] || { summary "$passed" "$failed"; exit "$status"; }

# The stage above ran the escape catalogue in interpreters forked from a
# fork template, as the server starts them by default. The same catalogue
# runs again against each other way python can start: the cold interpreter
# the server falls back to, a fresh python forked in place (`fresh: true`),
# and the jail alone (`prims run`, the script as python's main program).
live_tests=() live_names=()
for f in tests/tests/escape_*.rs tests/tests/limits.rs tests/tests/bad_input.rs tests/tests/happy.rs; do
  live_names+=("$(basename "$f" .rs)")
  live_tests+=(--test "${live_names[-1]}")
done
# catalogue_stage MODE: the catalogue above, once more, with
# PRIMS_TEST_MODE=MODE; its figures join the totals, and a failure ends the run.
catalogue_stage() {
  local mode=$1 status stage_passed stage_failed
  echo "== cargo test, ${mode^^} mode (PRIMS_TEST_MODE=$mode): ${live_names[*]}"
  set +e
  PRIMS_TEST_MODE="$mode" cargo test -p prims-tests --locked --no-fail-fast "${live_tests[@]}" \
    -- --test-threads="${PRIMS_TEST_THREADS:-4}" 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  set -e
  stage_passed=$(awk '/^test result:/ {p += $4} END {print p + 0}' "$log")
  stage_failed=$(awk '/^test result:/ {f += $6} END {print f + 0}' "$log")
  echo "$mode mode: $stage_passed passed, $stage_failed failed"
  passed=$((passed + stage_passed))
  failed=$((failed + stage_failed))
  [ "$status" -eq 0 ] || { summary "$passed" "$failed"; exit "$status"; }
}
catalogue_stage cold
catalogue_stage in-place
catalogue_stage one-shot

echo "== MCP clients (Python SDK, Inspector, mcp-remote) against prims serve"
mcp_log=$(mktemp)
set +e
PRIMS_MCP_NO_BUILD=1 tests/mcp/run.sh 2>&1 | tee "$mcp_log"
mcp_status=${PIPESTATUS[0]}
set -e
# pytest's summary: "N passed[, M failed]..." on its last line.
# Only run.sh's own summary line counts (the conformance lines also say "failed").
mcp_summary=$(grep '^tests/mcp: ' "$mcp_log" | tail -1)
mcp_passed=$(grep -Eo '[0-9]+ passed' <<<"$mcp_summary" | grep -Eo '[0-9]+' || echo 0)
mcp_failed=$(grep -Eo '[0-9]+ failed' <<<"$mcp_summary" | grep -Eo '[0-9]+' || echo 0)
rm -f "$mcp_log"
passed=$((passed + mcp_passed))
failed=$((failed + mcp_failed))
[ "$mcp_status" -eq 0 ] || { summary "$passed" "$failed"; exit "$mcp_status"; }

# The remaining stages each count as one test; a failure still ends with the summary line.
stage() {
  if "$@"; then
    passed=$((passed + 1))
  else
    echo "FAILED: $*"
    summary "$passed" "$((failed + 1))"
    exit 1
  fi
}
echo "== the jailer's and the syscall table's unit tests as nobody (they need no privilege)"
stage scripts/unprivileged-units.sh
echo "== the README's quick start: scripts/serve.sh, driven by the Python MCP SDK"
stage tests/quickstart.sh
echo "== the container entry point: refuses without privilege, serves with it"
stage tests/container-entrypoint.sh
echo "== packaging: the Kubernetes manifests (kustomize, the 1.32 schemas, the router's haproxy.cfg)"
stage tests/kubernetes/validate.sh
echo "== packaging: the .deb, and systemd-analyze verify on its units"
stage packaging/build-deb.sh
stage packaging/verify-units.sh target/debian/prims_*.deb

if [ "${PRIMS_VM_TESTS:-1}" != 0 ]; then
  echo "== cgroup v2, the .deb and the systemd units in a VM (PRIMS_VM_TESTS=0 skips)"
  stage scripts/vm-check.sh
fi
summary "$passed" "$failed"
