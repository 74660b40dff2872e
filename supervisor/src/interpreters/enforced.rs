//! What enforces each limit of a live interpreter's calls, as the outcome
//! reports it. The jailer reports this only when a jail ends, so for a
//! live one the supervisor works it out from the same facts.

use prims_protocol::jail::{CgroupBackend, Enforced, Enforcement, JobSpec};

/// The Landlock ABI the jailer asks for; an older kernel enforces part.
const LANDLOCK_WANT: u32 = 6;

pub(super) fn enforced(spec: &JobSpec, has_cgroup: bool) -> Enforced {
    let by = if has_cgroup {
        Enforcement::Cgroup
    } else {
        Enforcement::Rlimit
    };
    let abi = prims_syscalls::landlock_abi();
    Enforced {
        memory: by,
        pids: by,
        // Per call, measured in the cgroup (python's own time without one).
        cpu_time: by,
        wall_time: Enforcement::Timer,
        landlock: match abi {
            0 => Enforcement::None,
            a if a >= LANDLOCK_WANT => Enforcement::Full,
            _ => Enforcement::Partial,
        },
        landlock_abi: abi,
        seccomp: Enforcement::Full,
        cgroup: match (has_cgroup, spec.cgroup.backend) {
            (true, CgroupBackend::V1) => "v1".into(),
            (true, CgroupBackend::V2) => "v2".into(),
            _ => "none".into(),
        },
    }
}
