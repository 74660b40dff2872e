#!/bin/sh
# Container entry point: proves the jail can be built here before serving.
# A container without the privileges below cannot run the jail, and PRIMS
# never runs code without it: this says what is missing and exits 1.
#   prims-container [prims serve options]   (default: --listen 0.0.0.0:9000)
set -eu
policy=${PRIMS_POLICY:-/etc/prims/policy.toml}
state=${PRIMS_STATE_DIR:-/var/lib/prims}
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'print("jail ok")' > "$probe/probe.py"
if ! out=$(prims run --policy "$policy" --state-dir "$state" "$probe/probe.py" 2>&1) || [ "$out" != "jail ok" ]; then
  cat >&2 <<MSG
prims-container: the jail cannot be built in this container, so PRIMS will not start.
  what failed: $out
  The jail needs, inside the container:
    - user, mount, pid, net, IPC and UTS namespaces and mounts: docker's default seccomp
      and AppArmor profiles forbid them
        --security-opt seccomp=unconfined --security-opt apparmor=unconfined --cap-add SYS_ADMIN
    - a writable cgroup subtree for per-run limits (docker mounts /sys/fs/cgroup read-only)
        --cgroupns=private with a writable cgroup2 mount, or set cgroup.backend = "none"
        in the policy to fall back to rlimits
    - loop devices for per-session disk quotas
        --device /dev/loop-control plus /dev/loopN, or sessions.quota = "none" in the policy
  The simplest complete set is --privileged. Host checks, from prims doctor:
MSG
  prims doctor --policy "$policy" --state-dir "$state" >&2 || true
  exit 1
fi
rm -rf "$probe"
trap - EXIT
[ $# -gt 0 ] || set -- --listen 0.0.0.0:9000
exec prims serve --policy "$policy" --state-dir "$state" "$@"
