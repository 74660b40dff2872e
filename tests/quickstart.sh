#!/usr/bin/env bash
# Runs the README's quick-start command, `scripts/serve.sh`, as a newcomer
# would (default policy, so the base environment is built from PyPI), and
# drives it with the Python MCP SDK: run_code, an OOM, a fork bomb and a file.
# It also checks that the front-end runs as the `prims` user, never nobody.
# Its own state directory keeps the host's /var/lib/prims out of it.
set -euo pipefail
cd "$(dirname "$0")/.."
listen=${PRIMS_QUICKSTART_LISTEN:-127.0.0.1:9000}
state=$(mktemp -d /tmp/prims-quickstart.XXXXXX)
log=$state.log
cleanup() {
  [ -n "${pid:-}" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  findmnt -rn -o TARGET | grep "^$state/" | sort -r | xargs -r umount -l || true
  rm -rf "$state" "$log"
}
trap cleanup EXIT

tests/mcp/setup.sh >/dev/null
# The same build serve.sh starts with, done first, so the wait below times
# the server's start, not a cold release build on a loaded machine.
. scripts/toolchain.sh
cargo build --release --locked -p prims -p prims-jailer
scripts/serve.sh --listen "$listen" --state-dir "$state" >"$log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  if curl -fsS "http://$listen/health" >/dev/null 2>&1; then break; fi
  if ! kill -0 "$pid" 2>/dev/null; then cat "$log"; echo "quickstart: FAIL: scripts/serve.sh exited"; exit 1; fi
  sleep 0.5
done
grep -q "http://$listen/mcp" "$log" || { cat "$log"; echo "quickstart: FAIL: no URL in the banner"; exit 1; }
# The front-end runs as the `prims` system user (created on a first start), never as nobody.
prims_uid=$(id -u prims 2>/dev/null) || { cat "$log"; echo "quickstart: FAIL: prims serve created no prims user"; exit 1; }
front_uid=$(ps -o ruid=,args= --ppid "$pid" | awk '$3 == "mcp" { print $1 }')
if [ "$front_uid" != "$prims_uid" ] || [ "$front_uid" = 65534 ]; then
  ps -o pid,ruid,args --ppid "$pid"; cat "$log"
  echo "quickstart: FAIL: the front-end runs as uid '${front_uid}', not prims ($prims_uid)"; exit 1
fi
python=target/mcp-test-venv/bin/python
if "$python" tests/vm/mcp_smoke.py "http://$listen/mcp" before "$state.sid"; then
  rm -f "$state.sid"
  kill -TERM "$pid"; wait "$pid" && rc=0 || rc=$?
  pid=
  [ "$rc" -eq 0 ] || { cat "$log"; echo "quickstart: FAIL: prims serve exited $rc on SIGTERM"; exit 1; }
  echo "quickstart: ok"
else
  rm -f "$state.sid"; cat "$log"; echo "quickstart: FAIL"; exit 1
fi
