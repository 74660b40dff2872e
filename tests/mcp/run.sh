#!/usr/bin/env bash
# PRIMS's MCP front-end driven by real third-party clients: the Python `mcp`
# SDK (both protocol eras), the MCP Inspector CLI and mcp-remote, against a real
# `prims serve` (started by conftest.py). Needs root, like the jail tests.
#
#   tests/mcp/run.sh [pytest args...]     e.g. tests/mcp/run.sh -k legacy -x
#
# Installs the clients (setup.sh), builds target/debug/prims (set
# PRIMS_MCP_NO_BUILD=1 to use the binary as it is), runs pytest, and prints
# pytest's summary line last. Exits non-zero when any test fails or none ran;
# a test that cannot run fails with the reason instead of being skipped.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
target="${CARGO_TARGET_DIR:-$root/target}"
venv="${PRIMS_MCP_TEST_VENV:-$target/mcp-test-venv}"

if [ "$(id -u)" -ne 0 ]; then
  echo "tests/mcp/run.sh: needs root (prims serve starts the privileged supervisor)" >&2
  exit 1
fi

"$here/setup.sh"
"$root/scripts/ipython-site.sh"

if [ "${PRIMS_MCP_NO_BUILD:-0}" != 1 ]; then
  echo "tests/mcp/run.sh: cargo build --workspace --bins" >&2
  (cd "$root" && cargo build --workspace --bins --quiet) || {
    echo "tests/mcp/run.sh: cargo build failed" >&2
    exit 1
  }
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
(cd "$here" && "$venv/bin/python" -m pytest -p no:cacheprovider "$@") 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e

summary=$(grep -E '^=+ .*(passed|failed|error|skipped|no tests ran).* =+$' "$log" | tail -n 1 | sed -E 's/^=+ //; s/ =+$//' || true)
echo "tests/mcp: ${summary:-pytest printed no summary line (exit $status)}"
if [ "$status" -eq 5 ]; then
  echo "tests/mcp/run.sh: pytest collected no tests" >&2
  exit 1
fi
exit "$status"
