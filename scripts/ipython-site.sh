#!/usr/bin/env bash
# Makes the IPython layer the tests bind into their jails
# (python.ipython_site), with the packages of python.ipython_packages installed
# for the host's python3 with pip --target, wheels only. The daemon builds
# its own layer from the index; tests share this one instead of each
# downloading it. Idempotent: a stamp records what was installed. It lives
# outside the checkout (PRIMS_IPYTHON_SITE, else /var/lib/prims-tests/
# ipython-site): a jail's mountinfo shows a bind's host path, and the escape
# tests check that no jail names the checkout's.
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(ipython matplotlib matplotlib-inline cloudpickle)
site="${PRIMS_IPYTHON_SITE:-/var/lib/prims-tests/ipython-site}"
stamp="$site/.prims-ipython-site"
want="$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])') ${packages[*]}"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "ipython-site: $site is ready ($want)"
  exit 0
fi
echo "== ipython-site: pip install --target $site ${packages[*]} (wheels only)"
rm -rf "$site" "$site.tmp"
mkdir -p "$(dirname "$site")"
/usr/bin/python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
  --root-user-action=ignore --only-binary :all: --target "$site.tmp" "${packages[@]}"
echo "$want" > "$site.tmp/.prims-ipython-site"
mv "$site.tmp" "$site"
echo "ipython-site: $site is ready ($want)"
