#!/usr/bin/env bash
# Installs what building and testing PRIMS needs on Debian/Ubuntu, once.
set -euo pipefail

need=()
[ -x /usr/bin/python3 ] || need+=(python3)
command -v cc >/dev/null || need+=(gcc)
# Environments: uv is installed with pip on first use. Session quotas: mke2fs.
/usr/bin/python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)
# The linter of the agent's Python (scripts/lint-python.sh) lives in a venv.
/usr/bin/python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need+=(python3-venv)
command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
command -v curl >/dev/null || need+=(curl)
# The egress tests' HTTPS server gets a fresh certificate from openssl.
command -v openssl >/dev/null || need+=(openssl)
# The egress tests put servers in network namespaces of their own.
command -v ip >/dev/null || need+=(iproute2)
# The systemd units: /bin/kill for ExecReload, systemd-analyze for their lint.
[ -x /bin/kill ] || need+=(procps)
command -v systemd-analyze >/dev/null || need+=(systemd)
# The cluster's router (scripts/cluster-local.sh, packaging/haproxy).
command -v haproxy >/dev/null || need+=(haproxy)
# The Kubernetes manifests' check: kubectl kustomize.
command -v kubectl >/dev/null || need+=(kubernetes-client)
if [ ${#need[@]} -gt 0 ]; then
  echo "== apt-get install ${need[*]}"
  apt-get update -q
  apt-get install -y -q "${need[@]}"
fi
. "$(dirname "$0")/toolchain.sh"
