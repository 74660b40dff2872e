#!/usr/bin/env bash
# The jailer's pure core needs no privilege: run its unit tests as nobody
# (uid 65534, no groups), so a test that quietly needs root fails here.
set -euo pipefail
cd "$(dirname "$0")/.."
bins=$(cargo test -p prims-jailer -p prims-syscalls --lib --locked --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["lib"]:
        print(m["executable"])')
[ -n "$bins" ] || { echo "unprivileged-units.sh: no unit-test binaries were built" >&2; exit 1; }
for bin in $bins; do
  echo "-- $(basename "$bin") as uid 65534"
  # The binary must be reachable by nobody; copy it out of a private tree.
  tmp=$(mktemp -d)
  cp "$bin" "$tmp/" && chmod 755 "$tmp" "$tmp/$(basename "$bin")"
  (cd "$tmp" && setpriv --reuid=65534 --regid=65534 --clear-groups -- env -i PATH=/usr/bin:/bin \
    "$tmp/$(basename "$bin")" -q) || { rm -rf "$tmp"; exit 1; }
  rm -rf "$tmp"
done
