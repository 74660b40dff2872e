#!/usr/bin/env bash
# The Kubernetes manifests of packaging/kubernetes: built with
# `kubectl kustomize`, validated against the Kubernetes 1.32 schemas
# (kubernetes-validate --strict: unknown fields fail too), the router's
# haproxy.cfg checked by `haproxy -c` and equal to what render-router.sh
# makes, the policy equal to packaging/policy.example.toml and accepted by
# `prims policy check`, and what the cluster relies on asserted by
# check.py. Installs kubernetes-validate into target/k8s-venv once.
# Prints `kubernetes: N checks passed` last; exits non-zero on any failure.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
target="${CARGO_TARGET_DIR:-$root/target}"
k8s="$root/packaging/kubernetes"
venv="$target/k8s-venv"
prims="${PRIMS_BIN:-$target/debug/prims}"
say() { echo "tests/kubernetes: $*" >&2; }
die() { say "$*"; exit 1; }

command -v kubectl >/dev/null || die "kubectl not found (scripts/install-deps.sh installs it)"
command -v haproxy >/dev/null || die "haproxy not found (scripts/install-deps.sh installs it)"
stamp="$venv/.prims-$(sha256sum "$here/requirements.txt" | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv" || die "creating $venv failed"
  "$venv/bin/pip" install -q -r "$here/requirements.txt" || die "pip install kubernetes-validate failed"
  touch "$stamp"
fi

out="$target/kubernetes"
mkdir -p "$out"
kubectl kustomize "$k8s" > "$out/all.yaml" || die "kubectl kustomize packaging/kubernetes failed"
"$venv/bin/kubernetes-validate" --strict --quiet -k 1.32.0 "$out/all.yaml" \
  || die "the manifests do not validate against the Kubernetes 1.32 schemas"
say "kubectl kustomize and kubernetes-validate --strict (1.32): ok"

cp "$k8s/haproxy.cfg" "$out/haproxy.cfg.committed"
"$k8s/render-router.sh"
if ! diff -u "$out/haproxy.cfg.committed" "$k8s/haproxy.cfg"; then
  cp "$out/haproxy.cfg.committed" "$k8s/haproxy.cfg"
  die "packaging/kubernetes/haproxy.cfg is stale: run packaging/kubernetes/render-router.sh"
fi
haproxy -c -q -f "$k8s/haproxy.cfg" || die "haproxy -c refuses packaging/kubernetes/haproxy.cfg"
cmp -s "$k8s/policy.toml" "$root/packaging/policy.example.toml" \
  || die "packaging/kubernetes/policy.toml differs from packaging/policy.example.toml: copy it again"
"$prims" policy check "$k8s/policy.toml" >/dev/null || die "prims policy check refuses the policy"
say "haproxy.cfg is current and valid, the policy checks"

"$venv/bin/python" "$here/check.py" "$out/all.yaml"
