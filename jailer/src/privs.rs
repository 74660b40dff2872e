//! Resource limits, the drop to no capabilities with no_new_privs, and
//! python's identity.

use crate::error::JailError;
use crate::rootfs::JAIL_UID;
use caps::CapSet;
use nix::errno::Errno;
use nix::sys::resource::{setrlimit, Resource};
use nix::unistd::{setresgid, setresuid, Gid, Uid};
use prims_protocol::jail::{JobLimits, JAIL_PENDING_SIGNALS};

/// The rlimits the kernel counts per user, along the user-namespace chain
/// as well as against the process's own limit: processes, pending
/// signals, POSIX message-queue bytes and locked shared memory.
pub const PER_USER: [Resource; 4] = [
    Resource::RLIMIT_NPROC,
    Resource::RLIMIT_SIGPENDING,
    Resource::RLIMIT_MSGQUEUE,
    Resource::RLIMIT_MEMLOCK,
];

/// The rlimits of a job: (resource, name, soft, hard). Every [`PER_USER`]
/// one is set, so that a template's child, which applies this list to
/// itself after lifting them, gets exactly a cold jail's.
pub fn rlimits(
    limits: &JobLimits,
    memory_backstop: bool,
) -> Vec<(Resource, &'static str, u64, u64)> {
    let cpu_s = limits.cpu_time_ms.div_ceil(1000);
    let mut list = vec![
        (Resource::RLIMIT_CORE, "core", 0, 0),
        (
            Resource::RLIMIT_NOFILE,
            "nofile",
            limits.open_files,
            limits.open_files,
        ),
        (
            Resource::RLIMIT_FSIZE,
            "fsize",
            limits.file_size_bytes,
            limits.file_size_bytes,
        ),
        (Resource::RLIMIT_MEMLOCK, "memlock", 64 << 10, 64 << 10),
        // Backstops: the cgroup and the jailer's timer are the real limits.
        (Resource::RLIMIT_NPROC, "nproc", limits.pids, limits.pids),
        (Resource::RLIMIT_CPU, "cpu", cpu_s + 1, cpu_s + 2),
        (
            Resource::RLIMIT_SIGPENDING,
            "sigpending",
            JAIL_PENDING_SIGNALS,
            JAIL_PENDING_SIGNALS,
        ),
        // No POSIX message queue: seccomp refuses mq_open too.
        (Resource::RLIMIT_MSGQUEUE, "msgqueue", 0, 0),
    ];
    if memory_backstop {
        let as_bytes = limits.memory_bytes.saturating_add(limits.swap_bytes);
        list.push((Resource::RLIMIT_AS, "as", as_bytes, as_bytes));
    }
    list
}

pub fn set_rlimits(limits: &JobLimits, memory_backstop: bool) -> Result<(), JailError> {
    set(rlimits(limits, memory_backstop))
}

/// [`set_rlimits`] but the [`PER_USER`] ones, which stay as inherited.
pub fn set_rlimits_but_per_user(
    limits: &JobLimits,
    memory_backstop: bool,
) -> Result<(), JailError> {
    let mut list = rlimits(limits, memory_backstop);
    list.retain(|(res, ..)| !PER_USER.contains(res));
    set(list)
}

/// Lifts the [`PER_USER`] rlimits of this process as far as it may, before
/// it makes a fork template's user namespace: the kernel takes a new
/// namespace's ceilings on what its owner's descendants count there from
/// the maker's rlimits. Unlimited with `CAP_SYS_RESOURCE`; without it, the
/// soft limits up to the hard ones (which the supervisor checked hold
/// every child's share).
pub fn lift_per_user_rlimits() -> Result<(), JailError> {
    for res in PER_USER {
        let unlimited = (libc::RLIM_INFINITY, libc::RLIM_INFINITY);
        if setrlimit(res, unlimited.0, unlimited.1).is_ok() {
            continue;
        }
        let fail = |errno| JailError::Rlimit {
            resource: "per-user",
            errno,
        };
        let (_, hard) = nix::sys::resource::getrlimit(res).map_err(fail)?;
        setrlimit(res, hard, hard).map_err(fail)?;
    }
    Ok(())
}

fn set(list: Vec<(Resource, &'static str, u64, u64)>) -> Result<(), JailError> {
    for (res, name, soft, hard) in list {
        setrlimit(res, soft, hard).map_err(|errno| JailError::Rlimit {
            resource: name,
            errno,
        })?;
    }
    Ok(())
}

/// Drop every capability and set no_new_privs. The init keeps the ids it
/// was cloned with: effective 1000 (the host uid), real and saved the
/// host's root, which the jail cannot name. The kernel lets one process
/// signal, trace or `prlimit` another by comparing those ids, so python,
/// which is 1000 through and through, has no hold on the init.
pub fn drop_capabilities(cap_last_cap: u32) -> Result<(), JailError> {
    // The caps crate knows fewer capabilities than newer kernels have.
    for cap in 0..=cap_last_cap {
        // SAFETY: prctl with integer arguments only.
        let r = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) };
        if r < 0 && Errno::last() != Errno::EINVAL {
            return Err(JailError::CapDrop(format!(
                "PR_CAPBSET_DROP {cap}: {}",
                Errno::last()
            )));
        }
    }
    caps::clear(None, CapSet::Ambient).map_err(|e| JailError::CapDrop(e.to_string()))?;
    for set in [CapSet::Effective, CapSet::Permitted, CapSet::Inheritable] {
        caps::clear(None, set).map_err(|e| JailError::CapDrop(e.to_string()))?;
    }
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } < 0 {
        return Err(JailError::NoNewPrivs(Errno::last()));
    }
    Ok(())
}

/// python's last step before exec: jail uid/gid 1000 as real, effective and
/// saved ids. No capability is needed, since 1000 is already the effective
/// id; it must happen before exec, or the kernel would treat python as
/// setuid (AT_SECURE).
pub fn become_jail_user() -> Result<(), JailError> {
    let gid = Gid::from_raw(JAIL_UID);
    setresgid(gid, gid, gid).map_err(JailError::SetGid)?;
    let uid = Uid::from_raw(JAIL_UID);
    setresuid(uid, uid, uid).map_err(JailError::SetUid)
}
