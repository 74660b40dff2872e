#!/usr/bin/env bash
# A PRIMS cluster on this one machine: N nodes (`prims serve --node I`),
# each with its own state directory, port, uid range and cgroup parent,
# behind HAProxy configured by packaging/haproxy/render.sh, all on loopback.
#
#   sudo scripts/cluster-local.sh up N     the router's MCP URL on the last line
#   sudo scripts/cluster-local.sh down     stop everything and clean up
#   sudo scripts/cluster-local.sh stop I   drain node I (SIGTERM) and wait for it to exit
#   sudo scripts/cluster-local.sh start I  start node I again, on its state
#
# Settings (environment):
#   PRIMS_CLUSTER_DIR   where nodes keep state, logs and pid files
#                       (default /var/tmp/prims-cluster)
#   PRIMS_CLUSTER_PORT  the router's port (default 9000); node I listens on
#                       PORT + 1 + I; the router's stats page (CSV at
#                       /stats;csv) is on PORT + 1000
#   PRIMS_BIN           the prims binary (default: target/release/prims,
#                       else target/debug/prims, else a release build)
#   PRIMS_DRAIN_DEADLINE  how long a node drains on SIGTERM (default 60s)
#   PRIMS_CLUSTER_POLICY  TOML appended to each node's policy (no [cgroup]
#                       or [identity] table: the script sets those per node)
#
# Node I's files are under $PRIMS_CLUSTER_DIR/node$I: serve.pid, serve.log,
# state/. SIGTERM to serve.pid drains the node; SIGKILL loses it.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

dir=${PRIMS_CLUSTER_DIR:-/var/tmp/prims-cluster}
port=${PRIMS_CLUSTER_PORT:-9000}
drain=${PRIMS_DRAIN_DEADLINE:-60s}

say() { echo "cluster-local: $*" >&2; }
die() { say "$*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "needs root: each node's supervisor builds namespaces and cgroups (use sudo)"

prims_bin() {
  if [ -n "${PRIMS_BIN:-}" ]; then echo "$PRIMS_BIN"; return; fi
  for b in target/release/prims target/debug/prims; do
    [ -x "$b" ] && { echo "$root/$b"; return; }
  done
  scripts/install-deps.sh >&2
  . scripts/toolchain.sh
  cargo build --release --locked -p prims -p prims-jailer >&2
  echo "$root/target/release/prims"
}

policy_for() {
  local i=$1
  cat <<TOML
[python]
default_packages = []
[cgroup]
parent = "prims-cluster-node$i"
[identity]
uid_base = $((4000000 + i * 100000))
uid_count = 1000
[sessions]
# Small workspaces: every session image is allocated in full, and the
# nodes share this one disk.
disk_quota = "64MiB"
TOML
  if [ -n "${PRIMS_CLUSTER_POLICY:-}" ]; then cat "$PRIMS_CLUSTER_POLICY"; fi
}

wait_healthy() {
  local url=$1 what=$2 i
  for i in $(seq 1 600); do
    curl -sf -o /dev/null "$url" && return 0
    sleep 0.1
  done
  return 1
}

# Start node $1 (in a session of its own, so that its process group is the
# whole node) and wait until its /health answers 200.
start_node() {
  local i=$1 nd="$dir/node$1" p=$((port + 1 + $1))
  [ ! -e "$nd/serve.pid" ] || ! kill -0 "$(cat "$nd/serve.pid")" 2>/dev/null \
    || die "node $i is running (pid $(cat "$nd/serve.pid"))"
  mkdir -p "$nd"
  chmod 755 "$nd"
  policy_for "$i" > "$nd/policy.toml"
  setsid "$(cat "$dir/prims-bin")" serve --node "$i" --listen "127.0.0.1:$p" \
    --state-dir "$nd/state" --policy "$nd/policy.toml" --drain-deadline "$drain" \
    </dev/null >>"$nd/serve.log" 2>&1 &
  echo $! > "$nd/serve.pid"
  echo "$p" > "$nd/port"
}

node_healthy() {
  wait_healthy "http://127.0.0.1:$(cat "$dir/node$1/port")/health" "node $1" \
    || { tail -n 30 "$dir/node$1/serve.log" >&2; die "node $1 did not become healthy"; }
}

# Wait until the router (if it runs) sees node $1 up: from then on its
# sessions' requests reach it.
router_sees() {
  local i
  [ -f "$dir/router.pid" ] || return 0
  for i in $(seq 1 100); do
    curl -s "http://127.0.0.1:$((port + 1000))/stats;csv" | grep -q "^prims,node$1,.*,UP," && return 0
    sleep 0.1
  done
  die "the router does not see node $1 up"
}

# Drain node $1 with one SIGTERM and wait for it to exit.
stop_node() {
  local nd="$dir/node$1" pid
  [ -f "$nd/serve.pid" ] || die "no node $1 in $dir"
  pid=$(cat "$nd/serve.pid")
  kill -TERM "$pid" 2>/dev/null || { rm -f "$nd/serve.pid"; return 0; }
  while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  rm -f "$nd/serve.pid"
}

up() {
  local n=$1 i servers=()
  case $n in ''|*[!0-9]*|0) die "usage: $0 up N (N >= 1)" ;; esac
  [ ! -e "$dir/router.pid" ] || die "a cluster is already up in $dir; run '$0 down' first"
  command -v haproxy >/dev/null || scripts/install-deps.sh >&2
  command -v haproxy >/dev/null || die "haproxy is not installed (apt-get install haproxy)"
  mkdir -p "$dir"
  chmod 755 "$dir"
  prims_bin > "$dir/prims-bin"
  for i in $(seq 0 $((n - 1))); do
    start_node "$i"
    servers+=("$i=127.0.0.1:$((port + 1 + i))")
  done
  for i in $(seq 0 $((n - 1))); do node_healthy "$i"; done
  PRIMS_HAPROXY_STATS="127.0.0.1:$((port + 1000))" \
    packaging/haproxy/render.sh "127.0.0.1:$port" "${servers[@]}" > "$dir/haproxy.cfg"
  haproxy -c -q -f "$dir/haproxy.cfg" || die "haproxy refused $dir/haproxy.cfg"
  haproxy -D -f "$dir/haproxy.cfg" -p "$dir/router.pid" || die "haproxy did not start"
  wait_healthy "http://127.0.0.1:$port/health" router || die "the router does not answer on port $port"
  say "$n nodes on ports $((port + 1))-$((port + n)), router on $port, state in $dir"
  echo "http://127.0.0.1:$port/mcp"
}

stop_pid() {
  local pidfile=$1 pid
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  # Twice: the first SIGTERM drains a node, the second stops it at once.
  kill -TERM "$pid" 2>/dev/null || true
  sleep 0.2
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$pidfile"
}

down() {
  [ -d "$dir" ] || { say "nothing in $dir"; return 0; }
  stop_pid "$dir/router.pid"
  for nd in "$dir"/node*; do
    [ -d "$nd" ] || continue
    stop_pid "$nd/serve.pid"
    # A killed node leaves its children (supervisor, front-end) behind.
    pkill -KILL -f -- "--state-dir $nd/state" 2>/dev/null || true
  done
  sleep 0.3
  # Workspaces are loop-mounted images: unmount before removing.
  findmnt -rn -o TARGET | grep -F "$dir/" | sort -r | while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done
  for cg in /sys/fs/cgroup/*/prims-cluster-node* /sys/fs/cgroup/prims-cluster-node*; do
    [ -d "$cg" ] || continue
    find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
  rm -rf "$dir"
  say "stopped and removed $dir"
}

node_arg() {
  case ${1:-} in ''|*[!0-9]*) die "usage: $0 start|stop I" ;; esac
  [ -d "$dir/node$1" ] || die "no node $1 in $dir"
}

case ${1:-} in
  up) up "${2:-}" ;;
  down) down ;;
  start) node_arg "${2:-}"; start_node "$2"; node_healthy "$2"; router_sees "$2" ;;
  stop) node_arg "${2:-}"; stop_node "$2" ;;
  *) echo "usage: $0 up N | down | start I | stop I" >&2; exit 2 ;;
esac
