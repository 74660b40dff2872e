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
exit $((fails > 0))
