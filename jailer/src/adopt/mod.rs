//! Adopting a child forked from a fork template (`ForkRole::Child`), as
//! the architecture guide's "Fork templates" lays out: the child says
//! hello on the `--adopt-fd` socket, gets its stdio, channel and plan,
//! unshares its namespaces; we map its user namespace to the job's host
//! uid, move it into the job cgroup, and fork the jail's init into its
//! namespaces (and a new pid namespace, whose pid 1 it is), which builds
//! the rest of the jail around it; the child joins that pid namespace and
//! forks python there, as pid 2.

mod init;
mod namespaces;
pub mod peer;
mod trees;

use namespaces::NAMESPACES;
use trees::open_trees;

use crate::error::JailError;
use crate::init::{Handed, InitFds};
use crate::plan::seccomp_rules::seccomp_rules;
use crate::{idmap, monitor, plan, report, seccomp, setup, sys};
use nix::errno::Errno;
use nix::sched::CloneFlags;
use nix::sys::wait::waitpid;
use nix::unistd::{fork, ForkResult};
use prims_cgroup::JobCgroup;
use prims_protocol::fork::{FromChild, Rlimit, ToChild};
use prims_protocol::jail::{ForkRole, JobSpec, Outcome};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;
use std::time::Instant;

pub fn run(
    spec: &JobSpec,
    adopt: OwnedFd,
    handed: Handed,
    start: Instant,
) -> Result<Outcome, JailError> {
    plan::spec::validate(spec)?;
    setup::check_not_terminal()?;
    let ForkRole::Child { template_python } = spec.fork else {
        return Err(JailError::Spec(
            "--adopt-fd is for a template's child".into(),
        ));
    };
    plan::spec::check_proxy_channel(spec.network, handed.proxy.is_some())?;
    let channel = handed
        .channel
        .ok_or(JailError::Spec("a template's child needs a channel".into()))?;
    let filters = seccomp::build(&seccomp_rules(spec)?)?;
    setup::in_job_cgroup(spec, |cgroup| {
        let ends = Ends {
            adopt,
            channel,
            proxy: handed.proxy,
        };
        adopt_in_cgroup(spec, &filters, cgroup, ends, template_python, start)
    })
}

/// The sockets an adoption uses: to the child, python's channel, and (in
/// proxy mode) the one the jail's listener goes out on.
struct Ends {
    adopt: OwnedFd,
    channel: OwnedFd,
    proxy: Option<OwnedFd>,
}

fn adopt_in_cgroup(
    spec: &JobSpec,
    filters: &seccomp::Filters,
    cgroup: Option<&dyn JobCgroup>,
    ends: Ends,
    template_python: u32,
    start: Instant,
) -> Result<Outcome, JailError> {
    let Ends {
        adopt,
        channel,
        proxy,
    } = ends;
    let step = || Instant::now() + peer::STEP;
    setup::drop_supplementary_groups()?;
    // The supervisor set this before the child could send; again, in case.
    peer::pass_credentials(adopt.as_fd())?;
    let hello = peer::expect(adopt.as_fd(), FromChild::Hello {}, step())?;
    let pid = hello.pid.ok_or(JailError::AdoptPeer(
        "its hello came without credentials".into(),
    ))?;
    let child = sys::pidfd_open(pid).map_err(|errno| JailError::AdoptCall {
        call: "pidfd_open",
        errno,
    })?;
    check_parent(pid, template_python)?;
    // The pidfd pins the process: if it is still alive, the pid read above was it.
    sys::pidfd_send_signal(child.as_fd(), 0).map_err(|errno| JailError::AdoptCall {
        call: "pidfd_send_signal",
        errno,
    })?;
    let self_attach = setup::v1_tasks_files(spec, cgroup)?;
    send_plan(
        adopt.as_fd(),
        spec,
        filters,
        &channel,
        &self_attach,
        cgroup.is_none(),
    )?;
    drop(channel);
    peer::expect(adopt.as_fd(), FromChild::Unshared {}, step())?;
    let (namespaces, template_userns) = open_namespaces(pid, template_python)?;
    idmap::write_nested(
        pid,
        &template_userns,
        idmap::inside(template_python, "uid_map", spec.host_uid)?,
        idmap::inside(template_python, "gid_map", spec.host_gid)?,
    )?;
    drop(template_userns);
    if let Some(cg) = cgroup {
        // It was told to move itself (v1); one that did not is moved.
        if self_attach.is_empty() || !setup::v1_holds(&self_attach, pid) {
            cg.attach(pid)?;
        }
    }
    let _ = std::fs::write(format!("/proc/{pid}/oom_score_adj"), "1000");
    let trees = open_trees(spec)?;
    let (release_r, release_w) = setup::pipe()?;
    let (report_r, report_w) = setup::pipe()?;
    let (pid_r, pid_w) = setup::pipe()?;
    // SAFETY: the jailer is single-threaded, so fork is sound.
    let helper = match unsafe { fork() }.map_err(JailError::Fork)? {
        ForkResult::Child => {
            drop((release_w, report_r, pid_r));
            let prepared = init::Prepared {
                spec,
                cap_last_cap: setup::cap_last_cap(),
                memory_backstop: cgroup.is_none(),
                self_attach,
                trees,
                adopt,
            };
            let fds = InitFds {
                release: release_r,
                report: report_w,
                proxy,
                channel: None,
            };
            init::enter(&namespaces, prepared, fds, pid_w)
        }
        ForkResult::Parent { child } => child,
    };
    drop((
        release_r,
        report_w,
        pid_w,
        self_attach,
        trees,
        namespaces,
        adopt,
    ));
    let _ = waitpid(helper, None);
    let init_pid = match read_pid(pid_r.as_fd()) {
        Ok(pid) => pid,
        Err(e) => return Err(helper_failure(report_r.as_fd()).unwrap_or(e)),
    };
    let init = sys::pidfd_open(init_pid).map_err(|errno| JailError::AdoptCall {
        call: "pidfd_open (init)",
        errno,
    })?;
    if let Some(cg) = cgroup {
        if spec.cgroup.backend == prims_protocol::jail::CgroupBackend::V2 {
            cg.attach(init_pid)?;
        }
    }
    nix::unistd::write(&release_w, &[1u8]).map_err(JailError::Pipe)?;
    drop(release_w);
    let watch = monitor::watch(spec, init.as_fd(), cgroup, start)?;
    let reports = report::read_all(report_r.as_fd());
    Ok(monitor::outcome(spec, cgroup, watch, reports, start))
}

/// What the child applies to itself once its jail is built around it.
fn send_plan(
    sock: BorrowedFd<'_>,
    spec: &JobSpec,
    filters: &seccomp::Filters,
    channel: &OwnedFd,
    self_attach: &[(PathBuf, OwnedFd)],
    memory_backstop: bool,
) -> Result<(), JailError> {
    let finite = |v: u64| (v != libc::RLIM_INFINITY).then_some(v);
    let rlimits = crate::privs::rlimits(&spec.limits, memory_backstop)
        .into_iter()
        .map(|(_, name, soft, hard)| Rlimit {
            resource: name.into(),
            soft: finite(soft),
            hard: finite(hard),
        })
        .collect();
    let filters = filters
        .programs()
        .iter()
        .map(|p| p.iter().map(|b| format!("{b:02x}")).collect())
        .collect();
    let plan = ToChild::Plan {
        rlimits,
        cap_last_cap: setup::cap_last_cap(),
        filters,
        attach: self_attach.len() as u32,
    };
    let mut fds = vec![1, 2, channel.as_raw_fd()];
    fds.extend(self_attach.iter().map(|(_, fd)| fd.as_raw_fd()));
    peer::send(sock, &plan, &fds)
}

/// The child must be the template's python's own child, not something it
/// claims to be.
fn check_parent(pid: libc::pid_t, template: u32) -> Result<(), JailError> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let parent = status
        .lines()
        .find_map(|l| l.strip_prefix("PPid:"))
        .and_then(|v| v.trim().parse::<u32>().ok());
    if parent != Some(template) || pid <= 0 {
        return Err(JailError::NotTemplateChild { pid, template });
    }
    Ok(())
}

const NS_GET_PARENT: libc::c_ulong = 0xb702;

/// The child's namespaces, which must be new ones: its user namespace a
/// child of the template's, which comes second.
type Namespaces = (Vec<(CloneFlags, OwnedFd)>, OwnedFd);

fn open_namespaces(pid: libc::pid_t, template: u32) -> Result<Namespaces, JailError> {
    let open = |path: PathBuf| {
        std::fs::File::open(&path)
            .map(OwnedFd::from)
            .map_err(|e| JailError::OpenSource {
                path,
                errno: Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
            })
    };
    let id = |fd: BorrowedFd<'_>| -> Result<(u64, u64), JailError> {
        nix::sys::stat::fstat(fd)
            .map(|st| (st.st_dev, st.st_ino))
            .map_err(|errno| JailError::AdoptCall {
                call: "fstat",
                errno,
            })
    };
    let theirs = open(PathBuf::from(format!("/proc/{template}/ns/user")))?;
    let mut out = Vec::new();
    for (name, flag) in NAMESPACES {
        let fd = open(PathBuf::from(format!("/proc/{pid}/ns/{name}")))?;
        if name == "user" {
            // SAFETY: NS_GET_PARENT takes no argument and returns a new fd.
            let parent = unsafe { libc::ioctl(fd.as_raw_fd(), NS_GET_PARENT) };
            if parent < 0 {
                return Err(JailError::AdoptCall {
                    call: "NS_GET_PARENT",
                    errno: Errno::last(),
                });
            }
            // SAFETY: the kernel returned a new fd that nothing else owns.
            let parent = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(parent) };
            if id(parent.as_fd())? != id(theirs.as_fd())? {
                return Err(JailError::AdoptPeer(
                    "its user namespace is not a new one below the template's".into(),
                ));
            }
        }
        out.push((flag, fd));
    }
    Ok((out, theirs))
}

/// Why the helper gave up before the init existed, as it reported.
fn helper_failure(reports: BorrowedFd<'_>) -> Option<JailError> {
    report::read_all(reports).into_iter().find_map(|r| match r {
        report::Report::SetupFailed(e) => Some(JailError::Child(e.message)),
        _ => None,
    })
}

fn read_pid(fd: BorrowedFd<'_>) -> Result<libc::pid_t, JailError> {
    let mut b = [0u8; 4];
    match nix::unistd::read(fd, &mut b) {
        Ok(4) => Ok(libc::pid_t::from_ne_bytes(b)),
        _ => Err(JailError::ChildLost),
    }
}
