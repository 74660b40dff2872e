#!/usr/bin/env bash
# Quick start: installs what PRIMS needs (apt packages), builds it, and runs
# `prims serve` on http://127.0.0.1:9000/mcp until Ctrl-C.
#   sudo scripts/serve.sh [prims serve options, e.g. --listen 127.0.0.1:9001]
# Under sudo it builds as root with the invoking user's Rust toolchain (see
# scripts/toolchain.sh), like scripts/test.sh, so target/ has one owner.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/serve.sh: PRIMS's supervisor needs root (namespaces, cgroups, id maps): run it with sudo" >&2
  exit 1
fi
scripts/install-deps.sh

. scripts/toolchain.sh
echo "== cargo build --release -p prims -p prims-jailer"
cargo build --release --locked -p prims -p prims-jailer
exec target/release/prims serve "$@"
