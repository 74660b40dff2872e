"""What the cluster relies on in the rendered manifests (tests/kubernetes/validate.sh)."""

import sys

import yaml

docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
by = {(d["kind"], d["metadata"]["name"].rsplit("-", 1)[0] if d["kind"] in ("ConfigMap", "Secret")
       else d["metadata"]["name"]): d for d in docs}
checks = 0


def check(cond, what):
    global checks
    if not cond:
        sys.exit(f"tests/kubernetes: FAIL {what}")
    checks += 1


sts = by[("StatefulSet", "prims")]
pod = sts["spec"]["template"]["spec"]
(node,) = pod["containers"]
env = {e["name"]: e for e in node.get("env", [])}
check(env["PRIMS_NODE"]["valueFrom"]["fieldRef"]["fieldPath"]
      == "metadata.labels['apps.kubernetes.io/pod-index']", "the node id is the pod's ordinal")
check(sts["spec"]["serviceName"] == "prims-nodes", "the nodes' DNS names come from prims-nodes")
anti = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
check(anti["topologyKey"] == "kubernetes.io/hostname", "one PRIMS node per Kubernetes node")
pre = node["lifecycle"]["preStop"]["exec"]["command"]
check(pre[:2] == ["prims", "drain"] and "--wait" in pre, "preStop drains and waits")
deadline = next(a for a in node["args"] if a.startswith("--drain-deadline="))
check(pod["terminationGracePeriodSeconds"] > 600 and deadline == "--drain-deadline=10m",
      "the grace period outlasts the 10-minute drain")
check(node["readinessProbe"]["httpGet"]["path"] == "/health", "readiness is /health")
check(node["livenessProbe"]["httpGet"]["path"] == "/health/live", "liveness is /health/live")
check(node["securityContext"]["privileged"] is True
      and node["securityContext"]["seccompProfile"]["type"] == "Unconfined",
      "the jail's privileges are granted")
mounts = {m["mountPath"] for m in node["volumeMounts"]}
check({"/var/lib/prims", "/etc/prims/policy.toml", "/etc/prims/frontend.toml"} <= mounts,
      "state, policy and tokens are mounted")
check(sts["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "state",
      "each node keeps its state on its own volume")

headless = by[("Service", "prims-nodes")]["spec"]
check(headless["clusterIP"] == "None" and headless["publishNotReadyAddresses"] is True,
      "draining (not ready) nodes stay resolvable for their sessions")
router = by[("Deployment", "prims-router")]["spec"]["template"]["spec"]
check(router["volumes"][0]["configMap"]["name"].startswith("prims-router"), "the router reads its config")
check(router["containers"][0]["securityContext"]["capabilities"]["drop"] == ["ALL"],
      "the router holds no capability")
for kind, name in [("ConfigMap", "prims-policy"), ("ConfigMap", "prims-router"),
                   ("Secret", "prims-tokens"), ("Service", "prims"),
                   ("PodDisruptionBudget", "prims-nodes"), ("PodDisruptionBudget", "prims-router")]:
    check((kind, name) in by, f"{kind} {name} exists")
check(by[("PodDisruptionBudget", "prims-nodes")]["spec"]["maxUnavailable"] == 1,
      "nodes are disrupted one at a time")
for d in docs:
    for c in d.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
        r = c.get("resources", {})
        check(r.get("requests") and r.get("limits", {}).get("memory"),
              f"{d['metadata']['name']}/{c['name']} has requests and a memory limit")
print(f"kubernetes: {checks} checks passed")
