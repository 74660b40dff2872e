#!/usr/bin/env bash
# Quick start: installs what PRIMS needs (apt packages), builds it, and runs
# `prims serve` on http://127.0.0.1:9000/mcp until Ctrl-C.
#   sudo scripts/serve.sh [prims serve options, e.g. --listen 127.0.0.1:9001]
# Under sudo, the build runs as the invoking user with their Rust toolchain,
# so target/ stays theirs; only `prims serve` runs as root.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/serve.sh: PRIMS's supervisor needs root (namespaces, cgroups, id maps): run it with sudo" >&2
  exit 1
fi
scripts/install-deps.sh

build=(cargo build --release --locked -p prims -p prims-jailer)
if [ -n "${SUDO_USER:-}" ] && [ "$SUDO_USER" != root ]; then
  home=$(getent passwd "$SUDO_USER" | cut -d: -f6)
  echo "== ${build[*]} (as $SUDO_USER)"
  sudo -u "$SUDO_USER" env "PATH=$home/.cargo/bin:$PATH" "${build[@]}"
else
  echo "== ${build[*]}"
  "${build[@]}"
fi
exec target/release/prims serve "$@"
