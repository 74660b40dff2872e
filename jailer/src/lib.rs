//! prims-jailer builds the jail for one job and reports a single outcome.
//!
//! It must stay single-threaded: it forks, changes credentials and installs
//! seccomp filters, none of which is sound in a multi-threaded process.
//!
//! What it decides from the spec (which specs it refuses, the Landlock
//! access set, python's argv and environment, the seccomp rules) is plain
//! data computed in `plan`, unit-tested without root; the other modules
//! apply it.
//!
//! It owns everything done to build a jail: the namespaces and id maps,
//! the mounts and `pivot_root`, rlimits, capabilities, Landlock and
//! seccomp, the jail's init, and the one outcome record. It must never:
//!
//! - start a thread, or link tokio or the policy parser: it depends on
//!   `prims-protocol`, `prims-cgroup` and `prims-syscalls` alone (neither
//!   `prims-policy` nor `toml` is in its tree; `tests/tests/layout.rs`
//!   checks);
//! - trust the spec's sender beyond the fd it came on: a spec is read
//!   within `MAX_SPEC_BYTES` and refused before anything is built if it
//!   maps host root, leaves a limit at 0, names a path that is not there
//!   or binds over the jail's own mounts ([`read_spec`], `plan::spec`);
//! - let python inherit more than its stdio and, when given, the channel
//!   on fd 3: the jailer closes every other fd and clears its environment
//!   first, and python starts with no capability, `no_new_privs`, and
//!   seccomp applied last, just before its `execve`;
//! - map host root into the jail, or leave a process behind: the init is
//!   pid 1 of the jail's pid namespace, and the job cgroup is killed and
//!   removed after it.

pub mod args;
mod error;
mod idmap;
mod inherit;
mod init;
mod landlock_rules;
mod monitor;
mod mounts;
mod net;
mod owner;
mod plan;
mod privs;
mod proc_mask;
mod report;
mod rootfs;
mod seccomp;
mod signals;
mod sys;
mod userns_limits;

pub use error::JailError;
pub use plan::spec::read as read_spec;
pub use prims_syscalls::landlock_abi;

use init::{InitFds, Prepared};
use nix::errno::Errno;
use prims_cgroup::{JobCgroup, Limits};
use prims_protocol::jail::{CgroupBackend, Enforced, JobSpec, Outcome, Status};
use std::os::fd::{AsFd, OwnedFd};
use std::time::Instant;

/// The cgroup namespace is not among these: the init unshares it once it
/// sits in its job cgroup, so `/proc/self/cgroup` shows `/` and no host path.
const NAMESPACES: u64 = (libc::CLONE_NEWUSER
    | libc::CLONE_NEWNS
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS) as u64;

/// The fds a job hands on: the jailer closes its copies once the init is
/// cloned, the init its own once python is forked.
struct Handed {
    /// `NetworkMode::Proxy`: the socket the jail's listener goes out on.
    proxy: Option<OwnedFd>,
    /// python's fd 3.
    channel: Option<OwnedFd>,
}

/// Run one job and describe how it ended. Never panics on bad input: every
/// failure becomes a `setup_error` outcome. `proxy` is the channel the
/// jail's listener goes out on in `NetworkMode::Proxy`; `channel` becomes
/// python's fd 3.
pub fn run(spec: &JobSpec, proxy: Option<OwnedFd>, channel: Option<OwnedFd>) -> Outcome {
    let start = Instant::now();
    match run_jail(spec, start, Handed { proxy, channel }) {
        Ok(outcome) => outcome,
        Err(e) => setup_failure(&e, start),
    }
}

pub fn setup_failure(e: &JailError, start: Instant) -> Outcome {
    Outcome {
        status: Status::SetupError,
        wall_ms: start.elapsed().as_millis() as u64,
        setup_error: Some(e.to_setup_error()),
        enforced: Enforced {
            cgroup: "none".into(),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// python inherits our stdout and stderr: a terminal there would put the
/// caller's tty within its reach.
fn check_not_terminal() -> Result<(), JailError> {
    for fd in [1, 2] {
        // SAFETY: isatty only inspects the fd.
        if unsafe { libc::isatty(fd) } == 1 {
            return Err(JailError::Terminal);
        }
    }
    Ok(())
}

fn cap_last_cap() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(63)
}

fn job_cgroup(spec: &JobSpec) -> Result<Option<Box<dyn JobCgroup>>, JailError> {
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
    if spec.cpu_idle {
        let _ = job.set_cpu_priority(prims_cgroup::CpuPriority::Idle);
    }
    Ok(Some(job))
}

fn pipe() -> Result<(OwnedFd, OwnedFd), JailError> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(JailError::Pipe)
}

fn run_jail(spec: &JobSpec, start: Instant, handed: Handed) -> Result<Outcome, JailError> {
    plan::spec::validate(spec)?;
    check_not_terminal()?;
    plan::spec::check_proxy_channel(spec.network, handed.proxy.is_some())?;
    let filters = seccomp::build(&plan::seccomp_rules::seccomp_rules(spec)?)?;
    let cgroup = job_cgroup(spec)?;
    let result = run_in_cgroup(spec, filters, cgroup.as_deref(), start, handed);
    if let Some(cg) = cgroup {
        // The pid namespace is gone by now; this catches stragglers anyway.
        let _ = cg.kill();
        let _ = cg.destroy();
    }
    result
}

fn run_in_cgroup(
    spec: &JobSpec,
    filters: seccomp::Filters,
    cgroup: Option<&dyn JobCgroup>,
    start: Instant,
    handed: Handed,
) -> Result<Outcome, JailError> {
    // The init inherits our supplementary groups, and setgroups is denied
    // inside the user namespace: drop them here.
    // SAFETY: setgroups with an empty list.
    if unsafe { libc::setgroups(0, std::ptr::null()) } < 0 {
        return Err(JailError::Setgroups(Errno::last()));
    }
    let (release_r, release_w) = pipe()?;
    let (report_r, report_w) = pipe()?;
    let prepared = Prepared {
        spec,
        filters,
        cap_last_cap: cap_last_cap(),
        memory_backstop: cgroup.is_none(),
        self_attach: v1_tasks_files(spec, cgroup)?,
    };
    let cg_fd = cgroup.and_then(|c| c.dir_fd());
    let forked = owner::clone_as(spec.host_uid, spec.host_gid, || {
        sys::clone_fork(NAMESPACES, cg_fd)
    })?;
    let (pid, pidfd) = match forked {
        sys::Forked::Child => {
            drop(release_w);
            drop(report_r);
            init::run(
                prepared,
                InitFds {
                    release: release_r,
                    report: report_w,
                    proxy: handed.proxy,
                    channel: handed.channel,
                },
            )
        }
        sys::Forked::Parent { pid, pidfd } => (pid, pidfd),
    };
    // Our copies of the cgroup files the init joins through.
    drop(prepared);
    drop(release_r);
    drop(report_w);
    // Only the init sends on the proxy socket; only python uses the channel.
    drop(handed);
    let released = (|| {
        idmap::write(pid, spec.host_uid, spec.host_gid)?;
        if let Some(cg) = cgroup {
            if cg_fd.is_none() && spec.cgroup.backend == CgroupBackend::V2 {
                cg.attach(pid)?;
            }
        }
        // Make python the first choice of the OOM killer, not the host's
        // daemons. Written as root: the init's /proc files are root's, since
        // the id switch around the clone made it non-dumpable.
        let _ = std::fs::write(format!("/proc/{pid}/oom_score_adj"), "1000");
        nix::unistd::write(&release_w, &[1u8]).map_err(JailError::Pipe)?;
        Ok::<(), JailError>(())
    })();
    if let Err(e) = released {
        let _ = sys::pidfd_send_signal(pidfd.as_fd(), libc::SIGKILL);
        let _ = sys::wait_pidfd(pidfd.as_fd());
        return Err(e);
    }
    drop(release_w);
    let watch = monitor::watch(spec, pidfd.as_fd(), cgroup, start)?;
    let reports = report::read_all(report_r.as_fd());
    Ok(monitor::outcome(spec, cgroup, watch, reports, start))
}

/// On v1 the init moves itself by writing "0" to each job directory's
/// `tasks` file: a thread moving itself skips the global threadgroup lock
/// whose write side waits for an RCU grace period (5-20 ms per run), which
/// a write of another pid to `cgroup.procs` would take.
///
/// The files are opened here, as root, and the init inherits them: v1
/// allows a move when the *opener's* euid is root or the moving task's real
/// or saved uid, and the init's euid is the host uid while those are root.
fn v1_tasks_files(
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
