#!/usr/bin/env bash
# The container entry point (packaging/container/entrypoint.sh), run on this
# host since no container engine is assumed: without privilege (a user
# namespace whose root has no power over the host: what a default docker
# container looks like to the jail) it must refuse to start and say why; as
# real root it must serve.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PWD/target/release:$PATH PRIMS_POLICY=$PWD/packaging/policy.example.toml
tmp=$(mktemp -d)
chmod 711 "$tmp"  # the front-end (the prims user) must reach the socket below it
trap 'findmnt -rn -o TARGET | grep "^$tmp/" | sort -r | xargs -r umount -l || true; rm -rf "$tmp"' EXIT
fails=0

set +e
out=$(PRIMS_STATE_DIR=$tmp/a unshare -U -r -m --propagation private packaging/container/entrypoint.sh 2>&1)
rc=$?
set -e
if [ "$rc" -eq 1 ] && grep -q "the jail cannot be built in this container, so PRIMS will not start" <<<"$out" \
   && grep -q "has no such uid" <<<"$out" && grep -q -- "--privileged" <<<"$out" && ! grep -q "PRIMS is running" <<<"$out"; then
  echo "PASS entrypoint_refuses_without_privilege"
else
  echo "FAIL entrypoint_refuses_without_privilege (exit $rc): $out"; fails=$((fails+1))
fi

port=$((20000 + RANDOM % 20000))
PRIMS_STATE_DIR=$tmp/b packaging/container/entrypoint.sh --listen "127.0.0.1:$port" >"$tmp/log" 2>&1 &
pid=$!
up=0
for _ in $(seq 1 200); do
  curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1 && { up=1; break; }
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.2
done
kill -TERM "$pid" 2>/dev/null || true
wait "$pid" || true
if [ "$up" -eq 1 ]; then
  echo "PASS entrypoint_serves_with_privilege"
else
  echo "FAIL entrypoint_serves_with_privilege: $(cat "$tmp/log")"; fails=$((fails+1))
fi
# As a container runs it: the entry point is PID 1 of its own PID namespace
# (docker stop, a pod's SIGTERM, send SIGTERM to PID 1 alone). A session's
# variables outlive the stop: the same state directory, served again, has
# them.
py=${PRIMS_MCP_TEST_VENV:-$PWD/target/mcp-test-venv}/bin/python
serve_as_pid1() {
  port=$((20000 + RANDOM % 20000))
  PRIMS_STATE_DIR=$tmp/c unshare --pid --fork --mount --propagation private --mount-proc \
    packaging/container/entrypoint.sh --listen "127.0.0.1:$port" >>"$tmp/log1" 2>&1 &
  outer=$!
  for _ in $(seq 1 300); do
    curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1 && return 0
    kill -0 "$outer" 2>/dev/null || return 1
    sleep 0.2
  done
  return 1
}
stop_pid1() {
  local init
  init=$(pgrep -P "$outer" | head -1)
  [ -n "$init" ] && kill -TERM "$init"
  wait "$outer"
}
if [ ! -x "$py" ]; then
  echo "FAIL entrypoint_as_pid1_keeps_sessions_at_sigterm: no MCP test client at $py (tests/mcp/setup.sh makes it)"; fails=$((fails+1))
elif serve_as_pid1 && sid=$("$py" tests/container_session.py "http://127.0.0.1:$port/mcp" define) \
     && stop_pid1 && serve_as_pid1 \
     && kept=$("$py" tests/container_session.py "http://127.0.0.1:$port/mcp" check "$sid") && [ "$kept" = kept ]; then
  stop_pid1 || true
  echo "PASS entrypoint_as_pid1_keeps_sessions_at_sigterm"
else
  kill -KILL "$outer" 2>/dev/null || true
  echo "FAIL entrypoint_as_pid1_keeps_sessions_at_sigterm: $(tail -40 "$tmp/log1")"; fails=$((fails+1))
fi
exit $((fails > 0))
