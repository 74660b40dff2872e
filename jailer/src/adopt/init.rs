//! The adopted jail's init: it joins the child's namespaces (holding
//! capabilities in the child's user namespace only from then on), becomes
//! pid 1 of a new pid namespace, builds what differs from the template's
//! root (the workspace, `/tmp`, `/dev/shm`, `/proc`), confines itself as a cold init
//! does, hands the child its pid namespace and Landlock ruleset, reaps the
//! namespace's orphans and reports how python, pid 2, ended.

use super::namespaces;
use super::peer;
use super::trees::Trees;
use crate::error::JailError;
use crate::init::{redirect_stdio_to_null, set_fs_identity, set_pdeathsig, wait_release, InitFds};
use crate::landlock_rules;
use crate::plan::landlock_access::landlock_access;
use crate::report::{self, Report};
use crate::rootfs::{self, open_dir, JAIL_UID};
use crate::{net, privs, sys};
use nix::errno::Errno;
use nix::mount::{mount, MsFlags};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sched::CloneFlags;
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use prims_protocol::fork::{FromChild, ToChild};
use prims_protocol::jail::JobSpec;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

pub struct Prepared<'a> {
    pub spec: &'a JobSpec,
    pub cap_last_cap: u32,
    pub memory_backstop: bool,
    pub self_attach: Vec<(PathBuf, OwnedFd)>,
    pub trees: Trees,
    /// The socket to the child, for its ruleset and its go.
    pub adopt: OwnedFd,
}

/// In the helper the jailer forked: join the child's namespaces, fork the
/// init as the jailer's own child (`CLONE_PARENT`), tell the jailer its
/// pid, and leave. Never returns.
pub fn enter(
    namespaces: &[(CloneFlags, OwnedFd)],
    p: Prepared<'_>,
    fds: InitFds,
    pid_w: OwnedFd,
) -> ! {
    for (flag, fd) in namespaces {
        if let Err(errno) = nix::sched::setns(fd, *flag) {
            let e = JailError::Setns {
                ns: namespaces::name(*flag),
                errno,
            };
            report::send(fds.report.as_fd(), &Report::SetupFailed(e.to_setup_error()));
            // SAFETY: leaving a forked child without running destructors.
            unsafe { libc::_exit(1) }
        }
    }
    // A pid namespace owned by the child's user namespace, beside the
    // template's: the template's end ends none of its children.
    if let Err(errno) = nix::sched::unshare(CloneFlags::CLONE_NEWPID) {
        let e = JailError::UnsharePid(errno);
        report::send(fds.report.as_fd(), &Report::SetupFailed(e.to_setup_error()));
        // SAFETY: leaving a forked child without running destructors.
        unsafe { libc::_exit(1) }
    }
    // SAFETY: raw clone with a null stack acts like fork in this
    // single-threaded process; CLONE_PARENT makes the init the jailer's
    // child, so its parent-death signal follows the jailer.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone,
            libc::CLONE_PARENT as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    match pid {
        0 => {
            drop(pid_w);
            run(p, fds)
        }
        pid if pid > 0 => {
            let _ = nix::unistd::write(&pid_w, &(pid as libc::pid_t).to_ne_bytes());
            // SAFETY: leaving a forked child without running destructors.
            unsafe { libc::_exit(0) }
        }
        _ => {
            let e = JailError::Fork(Errno::last());
            report::send(fds.report.as_fd(), &Report::SetupFailed(e.to_setup_error()));
            // SAFETY: leaving a forked child without running destructors.
            unsafe { libc::_exit(1) }
        }
    }
}

fn run(mut p: Prepared<'_>, fds: InitFds) -> ! {
    let code = match setup_and_supervise(&mut p, &fds) {
        Ok(code) => code,
        Err(e) => {
            report::send(fds.report.as_fd(), &Report::SetupFailed(e.to_setup_error()));
            let _ = peer::send(p.adopt.as_fd(), &ToChild::Stop {}, &[]);
            1
        }
    };
    // SAFETY: _exit skips destructors and atexit handlers, as a forked child must.
    unsafe { libc::_exit(code) }
}

fn setup_and_supervise(p: &mut Prepared<'_>, fds: &InitFds) -> Result<i32, JailError> {
    let spec = p.spec;
    set_pdeathsig()?;
    wait_release(fds)?;
    for (path, tasks) in std::mem::take(&mut p.self_attach) {
        nix::unistd::write(&tasks, b"0")
            .map_err(|errno| JailError::CgroupSelfAttach { path, errno })?;
    }
    nix::sched::unshare(CloneFlags::CLONE_NEWCGROUP).map_err(JailError::UnshareCgroup)?;
    nix::unistd::setsid().map_err(JailError::Setsid)?;
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(JailError::MakePrivate)?;
    set_fs_identity()?;
    attach(&p.trees)?;
    rootfs::mount_tmp(Path::new("/tmp"), spec)?;
    // Over the template's: nothing of its /dev/shm, nor a sibling's.
    rootfs::mount_shm(Path::new("/dev/shm"), spec)?;
    rootfs::mount_proc(Path::new("/proc"), Path::new("/tmp"))?;
    // The template's view of the host's procfs was needed only for that
    // mount. An empty read-only tmpfs over its directory leaves nothing in
    // this jail a path there at all, not only one that Landlock and a
    // mode-0 directory bar. (Inherited mounts are locked together: it
    // cannot be unmounted, only covered.)
    crate::mounts::tmpfs(
        Path::new(rootfs::TEMPLATE_PROC_DIR),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC | MsFlags::MS_RDONLY,
        "mode=0,size=4k,nr_inodes=2",
    )?;
    // The child joins our pid namespace to fork python into it.
    let pid_ns = std::fs::File::open("/proc/self/ns/pid")
        .map(OwnedFd::from)
        .map_err(|e| JailError::OpenSource {
            path: "/proc/self/ns/pid".into(),
            errno: Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
        })?;
    // In the child's network namespace, as a cold init does in its own:
    // in proxy mode the jail's only way out, handed over before python runs.
    net::bring_up(spec, fds.proxy.as_ref())?;
    nix::unistd::sethostname("sandbox").map_err(JailError::Hostname)?;
    privs::set_rlimits(&spec.limits, p.memory_backstop)?;
    let access = landlock_access(spec);
    // python's own, made before ours restricts what we may open.
    let python_rules = landlock_rules::ruleset_fd(&access, spec.landlock_required)?;
    // As a cold init: effective uid 1000, real and saved the host's root,
    // which the jail cannot name (the capabilities stay for the drop).
    crate::owner::become_effective(JAIL_UID, JAIL_UID)?;
    privs::drop_capabilities(p.cap_last_cap)?;
    set_pdeathsig()?;
    let (enforcement, abi) = landlock_rules::apply(&access, spec.landlock_required)?;
    report::send(fds.report.as_fd(), &Report::Landlock { enforcement, abi });
    // SAFETY: prctl with integer arguments only; keeps python from reading our memory.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    let mut handed = vec![pid_ns.as_raw_fd()];
    handed.extend(python_rules.iter().map(AsRawFd::as_raw_fd));
    peer::send(p.adopt.as_fd(), &ToChild::Go {}, &handed)?;
    drop((python_rules, pid_ns));
    // Only python may hold the output pipes, so they close when it ends.
    redirect_stdio_to_null();
    Ok(reap_until_reported(p.adopt.as_fd(), fds))
}

/// Reaps the namespace's orphans as they come (python's parent, waiting
/// for an empty namespace before it forks a fresh python, counts on that)
/// until the child, python's parent outside it, says how python ended;
/// reports that. Orphans come here, python does not: an orphan goes to the
/// reaper of its parent's pid namespace.
fn reap_until_reported(adopt: BorrowedFd<'_>, fds: &InitFds) -> i32 {
    let children = orphans_signal();
    loop {
        while let Ok(status) = waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            if status == WaitStatus::StillAlive {
                break;
            }
        }
        let mut ready = vec![PollFd::new(adopt, PollFlags::POLLIN)];
        if let Some(sfd) = &children {
            ready.push(PollFd::new(sfd.as_fd(), PollFlags::POLLIN));
        }
        match poll(&mut ready, PollTimeout::from(REAP_EVERY_MS)) {
            Ok(0) | Err(Errno::EINTR) => continue,
            Ok(_) => {}
            Err(_) => return 1,
        }
        if let Some(sfd) = &children {
            while let Ok(Some(_)) = sfd.read_signal() {}
        }
        if !ready[0].any().unwrap_or(false) {
            continue;
        }
        let far = std::time::Instant::now() + peer::STEP;
        let report = match peer::recv(adopt, far).map(|r| r.body) {
            Ok(FromChild::Exited { code }) => Report::Exited(code),
            Ok(FromChild::Signaled { signal }) => Report::Signaled(signal),
            // A word out of turn, or the child gone without one: python
            // went with it.
            Ok(_) | Err(_) => Report::Signaled(libc::SIGKILL),
        };
        report::send(fds.report.as_fd(), &report);
        return 0;
    }
}

/// How often orphans are reaped while python runs, if SIGCHLD cannot
/// tell us.
const REAP_EVERY_MS: u16 = 1000;

/// SIGCHLD as a readable fd, blocked for the rest; `None` if the kernel
/// refuses one, and orphans are then reaped on the timer alone.
fn orphans_signal() -> Option<SignalFd> {
    let mut mask = SigSet::empty();
    mask.add(Signal::SIGCHLD);
    mask.thread_block().ok()?;
    SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC).ok()
}

/// The session's workspace over the template's, and `mounts/` read-only
/// within it, resolved without following a link.
fn attach(trees: &Trees) -> Result<(), JailError> {
    let put = |tree: &OwnedFd, target: &Path| {
        let dir = open_dir(target)?;
        sys::move_mount_to(tree.as_fd(), dir.as_fd()).map_err(|errno| JailError::MoveMount {
            target: target.display().to_string(),
            errno,
        })
    };
    put(&trees.workspace, Path::new("/workspace"))?;
    if let Some(mounts) = &trees.mounts {
        put(mounts, Path::new("/workspace/mounts"))?;
    }
    Ok(())
}
