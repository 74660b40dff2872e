//! Steps the jailer takes before any jail exists, shared by a cold jail
//! and an adopted one: the terminal check, the job cgroup, the files a v1
//! init joins it through, pipes, and the kernel's last capability.

use crate::error::JailError;
use crate::plan;
use nix::errno::Errno;
use prims_cgroup::{JobCgroup, Limits};
use prims_protocol::jail::{CgroupBackend, CpuClass, JobSpec};
use std::os::fd::OwnedFd;

/// python inherits our stdout and stderr: a terminal there would put the
/// caller's tty within its reach.
pub(crate) fn check_not_terminal() -> Result<(), JailError> {
    for fd in [1, 2] {
        // SAFETY: isatty only inspects the fd.
        if unsafe { libc::isatty(fd) } == 1 {
            return Err(JailError::Terminal);
        }
    }
    Ok(())
}

pub(crate) fn cap_last_cap() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(63)
}

pub(crate) fn job_cgroup(spec: &JobSpec) -> Result<Option<Box<dyn JobCgroup>>, JailError> {
    let Some(version) = plan::spec::cgroup_version(spec.cgroup.backend)? else {
        return Ok(None);
    };
    let manager = prims_cgroup::manager(version, &spec.cgroup.parents)?;
    let limits = Limits {
        memory_bytes: spec.limits.memory_bytes,
        swap_bytes: spec.limits.swap_bytes,
        pids: spec.limits.pids,
        cpu_millis: spec.limits.cpu_millis,
    };
    let job = manager.create_job(&spec.cgroup.job, &limits)?;
    // Before the clone, so not one instruction of the job runs at normal
    // priority.
    // Best effort: without a cpu controller the job only warms up slower.
    let priority = match spec.cpu {
        CpuClass::Normal => None,
        CpuClass::Batch => Some(prims_cgroup::CpuPriority::Batch),
        CpuClass::Idle => Some(prims_cgroup::CpuPriority::Idle),
    };
    if let Some(p) = priority {
        let _ = job.set_cpu_priority(p);
    }
    Ok(Some(job))
}

pub(crate) fn pipe() -> Result<(OwnedFd, OwnedFd), JailError> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(JailError::Pipe)
}

/// On v1 the init moves itself by writing "0" to each job directory's
/// `tasks` file: a thread moving itself skips the global threadgroup lock
/// whose write side waits for an RCU grace period (5-20 ms per run), which
/// a write of another pid to `cgroup.procs` would take.
///
/// The files are opened here, as root, and the init inherits them: v1
/// allows a move when the *opener's* euid is root or the moving task's real
/// or saved uid, and the init's euid is the host uid while those are root.
pub(crate) fn v1_tasks_files(
    spec: &JobSpec,
    cgroup: Option<&dyn JobCgroup>,
) -> Result<Vec<(std::path::PathBuf, OwnedFd)>, JailError> {
    let dirs = match (spec.cgroup.backend, cgroup) {
        (CgroupBackend::V1, Some(cg)) => cg.paths(),
        _ => return Ok(Vec::new()),
    };
    dirs.iter()
        .map(|d| {
            let path = d.join("tasks");
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .map(|f| (path.clone(), OwnedFd::from(f)))
                .map_err(|e| JailError::CgroupSelfAttach {
                    path,
                    errno: Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
                })
        })
        .collect()
}

/// Whether every job directory behind `files` (from [`v1_tasks_files`])
/// lists `pid` among its tasks.
pub(crate) fn v1_holds(files: &[(std::path::PathBuf, OwnedFd)], pid: libc::pid_t) -> bool {
    let pid = pid.to_string();
    files.iter().all(|(path, _)| {
        std::fs::read_to_string(path).is_ok_and(|tasks| tasks.lines().any(|l| l == pid))
    })
}

/// Runs `f` with the job cgroup of `spec` (none without a backend), then
/// kills what is left in it and removes it, whatever `f` returned.
pub(crate) fn in_job_cgroup<T>(
    spec: &JobSpec,
    f: impl FnOnce(Option<&dyn JobCgroup>) -> Result<T, JailError>,
) -> Result<T, JailError> {
    let cgroup = job_cgroup(spec)?;
    let result = f(cgroup.as_deref());
    if let Some(cg) = cgroup {
        // The pid namespace is gone by now; this catches stragglers anyway.
        let _ = cg.kill();
        let _ = cg.destroy();
    }
    result
}

/// The init inherits our supplementary groups, and setgroups is denied
/// inside the user namespace: drop them here.
pub(crate) fn drop_supplementary_groups() -> Result<(), JailError> {
    // SAFETY: setgroups with an empty list.
    if unsafe { libc::setgroups(0, std::ptr::null()) } < 0 {
        return Err(JailError::Setgroups(Errno::last()));
    }
    Ok(())
}
