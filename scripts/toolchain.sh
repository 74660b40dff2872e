# Sourced by the scripts that build: finds a Rust toolchain for root. Under
# sudo, root's PATH rarely has cargo; the invoking user's rustup toolchain is
# used then (read-only; crates download to root's own cargo home).
if ! command -v cargo >/dev/null 2>&1 && [ -n "${SUDO_USER:-}" ]; then
  _home=$(getent passwd "$SUDO_USER" | cut -d: -f6)
  if [ -x "$_home/.cargo/bin/cargo" ]; then
    export PATH="$_home/.cargo/bin:$PATH"
    [ -d "$_home/.rustup" ] && export RUSTUP_HOME="${RUSTUP_HOME:-$_home/.rustup}"
  fi
  unset _home
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "no Rust toolchain found: install one (https://rustup.rs), then run this again" >&2
  exit 1
fi
