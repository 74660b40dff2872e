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
echo "== cargo test (one-shot jails: prims run runs each script as python's main program)"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
cargo test --workspace --locked --no-fail-fast -- --test-threads="${PRIMS_TEST_THREADS:-4}" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
passed=$(awk '/^test result:/ {p += $4} END {print p + 0}' "$log")
failed=$(awk '/^test result:/ {f += $6} END {print f + 0}' "$log")
[ "$status" -eq 0 ] || { summary "$passed" "$failed"; exit "$status"; }

# The same escape catalogue against the jail the daemon really runs code in:
# every `prims run` of these tests gets --live, so each script is the one
# cell of a live interpreter (the agent on its channel, in the same jail).
live_tests=() live_names=()
for f in tests/tests/escape_*.rs tests/tests/limits.rs tests/tests/bad_input.rs tests/tests/happy.rs; do
  live_names+=("$(basename "$f" .rs)")
  live_tests+=(--test "${live_names[-1]}")
done
# catalogue_stage LABEL ENV_VAR: the catalogue above, once more, with
# ENV_VAR=1; its figures join the totals, and a failure ends the run.
catalogue_stage() {
  local label=$1 var=$2 status stage_passed stage_failed
  set +e
  env "$var=1" cargo test -p prims-tests --locked --no-fail-fast "${live_tests[@]}" \
    -- --test-threads="${PRIMS_TEST_THREADS:-4}" 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  set -e
  stage_passed=$(awk '/^test result:/ {p += $4} END {print p + 0}' "$log")
  stage_failed=$(awk '/^test result:/ {f += $6} END {print f + 0}' "$log")
  echo "$label: $stage_passed passed, $stage_failed failed"
  passed=$((passed + stage_passed))
  failed=$((failed + stage_failed))
  [ "$status" -eq 0 ] || { summary "$passed" "$failed"; exit "$status"; }
}
echo "== cargo test, LIVE INTERPRETER mode (PRIMS_TEST_LIVE=1, prims run --live): ${live_names[*]}"
catalogue_stage "live interpreter mode" PRIMS_TEST_LIVE

# And against interpreters forked from a fork template: each `prims run`
# starts a template and runs its script in a child the jailer adopted, or
# fails (the architecture guide's "Fork templates").
echo "== cargo test, FORKED mode (PRIMS_TEST_FORKED=1, prims run --live --forked): ${live_names[*]}"
catalogue_stage "forked mode" PRIMS_TEST_FORKED

# And against a fresh python forked in place of such a child, in its jail,
# as a `fresh: true` call gets it (the architecture guide's "Fresh in place").
echo "== cargo test, IN-PLACE mode (PRIMS_TEST_IN_PLACE=1, prims run --live --forked --in-place): ${live_names[*]}"
catalogue_stage "in-place mode" PRIMS_TEST_IN_PLACE

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
