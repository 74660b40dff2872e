#!/usr/bin/env bash
# Lints the systemd units as the .deb installs them: `systemd-analyze verify`
# in a scratch root holding the host's units plus the package's files. Any
# warning (an unknown key, a missing binary) fails, not only errors.
#   packaging/verify-units.sh target/debian/prims_*.deb
set -euo pipefail
deb=${1:?usage: verify-units.sh PACKAGE.deb}
if ! command -v systemd-analyze >/dev/null; then
  echo "verify-units: SKIPPED: systemd-analyze is not installed (apt-get install systemd)"
  exit 0
fi
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/usr/lib/systemd" "$root/usr/bin" "$root/tmp" "$root/etc"
for d in bin sbin lib; do ln -s "usr/$d" "$root/$d"; done
cp -a /usr/lib/systemd/system "$root/usr/lib/systemd/"
cp /bin/kill "$root/usr/bin/"
pkg="$root/pkg"
dpkg-deb -x "$deb" "$pkg"
cp -a "$pkg/usr/." "$root/usr/"
cp -a "$pkg/lib/systemd/system/." "$root/usr/lib/systemd/system/"
cp -a "$pkg/etc/." "$root/etc/"
units=$(cd "$pkg/lib/systemd/system" && ls)
out=$(systemd-analyze verify --root="$root" $units 2>&1) || { echo "$out"; echo "verify-units: FAIL"; exit 1; }
if [ -n "$out" ]; then
  echo "$out"; echo "verify-units: FAIL (warnings above)"; exit 1
fi
echo "verify-units: ok:" $units
