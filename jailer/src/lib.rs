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

mod adopt;
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
mod setup;
pub mod signals;
mod sys;
mod userns_limits;

pub use error::JailError;
pub use plan::spec::read as read_spec;
pub use prims_syscalls::landlock_abi;

use init::{Handed, InitFds, Prepared};
use prims_cgroup::JobCgroup;
use prims_protocol::jail::{CgroupBackend, Enforced, JobSpec, Outcome, Status};
use setup::{
    cap_last_cap, check_not_terminal, drop_supplementary_groups, in_job_cgroup, pipe,
    v1_tasks_files,
};
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

/// Run one job and describe how it ended. Never panics on bad input: every
/// failure becomes a `setup_error` outcome. `proxy` is the channel the
/// jail's listener goes out on in `NetworkMode::Proxy`; `channel` becomes
/// python's fd 3.
/// `adopt` is the socket to a fork template's child (`ForkRole::Child`),
/// which the jail is built around instead of a new python.
pub fn run(
    spec: &JobSpec,
    proxy: Option<OwnedFd>,
    channel: Option<OwnedFd>,
    adopt: Option<OwnedFd>,
) -> Outcome {
    let start = Instant::now();
    let result = match (adopt, spec.fork) {
        (Some(adopt), _) => adopt::run(spec, adopt, Handed { proxy, channel }, start),
        (None, prims_protocol::jail::ForkRole::Child { .. }) => Err(JailError::Spec(
            "a template's child is adopted through --adopt-fd".into(),
        )),
        (None, _) => run_jail(spec, start, Handed { proxy, channel }),
    };
    match result {
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

fn run_jail(spec: &JobSpec, start: Instant, handed: Handed) -> Result<Outcome, JailError> {
    plan::spec::validate(spec)?;
    check_not_terminal()?;
    plan::spec::check_proxy_channel(spec.network, handed.proxy.is_some())?;
    let filters = seccomp::build(&plan::seccomp_rules::seccomp_rules(spec)?)?;
    in_job_cgroup(spec, |cgroup| {
        run_in_cgroup(spec, filters, cgroup, start, handed)
    })
}

fn run_in_cgroup(
    spec: &JobSpec,
    filters: seccomp::Filters,
    cgroup: Option<&dyn JobCgroup>,
    start: Instant,
    handed: Handed,
) -> Result<Outcome, JailError> {
    drop_supplementary_groups()?;
    let (release_r, release_w) = pipe()?;
    let (report_r, report_w) = pipe()?;
    let variant = plan::variant::Variant::of(spec);
    let prepared = Prepared {
        spec,
        variant,
        filters,
        cap_last_cap: cap_last_cap(),
        memory_backstop: cgroup.is_none(),
        self_attach: v1_tasks_files(spec, cgroup)?,
    };
    let cg_fd = cgroup.and_then(|c| c.dir_fd());
    if !variant.per_user_rlimits {
        privs::lift_per_user_rlimits()?;
    }
    let namespaces = if variant.pid_namespace {
        NAMESPACES
    } else {
        NAMESPACES & !(libc::CLONE_NEWPID as u64)
    };
    let forked = owner::clone_as(spec.host_uid, spec.host_gid, || {
        sys::clone_fork(namespaces, cg_fd)
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
        idmap::write(pid, spec.host_uid, spec.host_gid, variant.children_ids)?;
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
