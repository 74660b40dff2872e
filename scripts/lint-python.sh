#!/usr/bin/env bash
# Lints the Python that runs in the jail (supervisor/agent, the agent's
# package, and the session install's program) with ruff, as the agent's
# ruff.toml says: every module imports what it uses, no name is undefined
# or unused. ruff is pinned and installed once into a venv under target/
# (scripts/install-deps.sh brings python3-venv).
set -euo pipefail
cd "$(dirname "$0")/.."
ruff_version=0.17.6
venv="${CARGO_TARGET_DIR:-target}/lint-venv"
if [ ! -x "$venv/bin/ruff" ] || [ "$("$venv/bin/ruff" --version)" != "ruff $ruff_version" ]; then
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "ruff==$ruff_version"
fi
"$venv/bin/ruff" check --no-cache --config supervisor/agent/ruff.toml supervisor/agent supervisor/src/envs/session_install.py
