#!/usr/bin/env bash
# Writes packaging/kubernetes/haproxy.cfg: the router's configuration for
# up to NODES PRIMS nodes (default 16), named by the StatefulSet's DNS
# records (prims-N.prims-nodes.NAMESPACE.svc.cluster.local) and resolved at
# run time, so nodes that do not exist yet are simply down. Rerun it after
# raising the StatefulSet's replicas past NODES.
#   packaging/kubernetes/render-router.sh [NODES] [NAMESPACE]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
nodes=${1:-16}
ns=${2:-prims}
specs=()
for i in $(seq 0 $((nodes - 1))); do
  specs+=("$i=prims-$i.prims-nodes.$ns.svc.cluster.local:9000")
done
PRIMS_HAPROXY_RESOLVERS=resolv-conf "$here/../haproxy/render.sh" 0.0.0.0:9000 "${specs[@]}" \
  > "$here/haproxy.cfg"
