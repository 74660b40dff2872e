#!/usr/bin/env bash
# Builds target/debian/prims_<version>_amd64.deb with cargo-deb (installed,
# pinned, into target/tools on first use). Prints the .deb's path last.
set -euo pipefail
cd "$(dirname "$0")/.."
version=3.8.0
tools=target/tools
if ! "$tools/bin/cargo-deb" --version 2>/dev/null | grep -q " $version\$"; then
  echo "build-deb: installing cargo-deb $version into $tools (a minute or two, once)" >&2
  cargo install --locked --quiet --root "$tools" --version "=$version" cargo-deb >&2 ||
    { echo "build-deb: cargo install cargo-deb failed (is crates.io reachable?)" >&2; exit 1; }
fi
cargo build --release --locked -p prims -p prims-jailer >&2
rm -f target/debian/prims_*.deb
"$tools/bin/cargo-deb" -p prims --no-build -o target/debian/ >&2
ls target/debian/prims_*.deb
