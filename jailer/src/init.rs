//! The jail's pid 1: it builds the jail from the inside, forks python as
//! pid 2, reaps every process, and reports how python ended. When it exits,
//! the kernel kills whatever is left in the pid namespace.

use crate::error::JailError;
use crate::landlock_rules;
use crate::plan::landlock_access::landlock_access;
use crate::plan::program::{program, Program, PYTHON};
use crate::plan::variant::Variant;
use crate::report::{self, Report};
use crate::rootfs::{self, JAIL_UID};
use crate::seccomp::Filters;
use crate::{inherit, net, privs, signals};
use nix::errno::Errno;
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::{fork, ForkResult, Pid};
use prims_protocol::jail::JobSpec;
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;

/// What the init inherits from the jailer across the clone.
pub struct InitFds {
    /// Read end of the release pipe: one byte once the id maps are written.
    pub release: OwnedFd,
    /// Write end of the report pipe.
    pub report: OwnedFd,
    /// Proxy mode: where the init sends the jail's listener.
    pub proxy: Option<OwnedFd>,
    /// python's fd 3; the init itself never reads or writes it.
    pub channel: Option<OwnedFd>,
}

/// The fds a job hands on: the jailer closes its copies once the init is
/// cloned, the init its own once python is forked.
pub(crate) struct Handed {
    /// `NetworkMode::Proxy`: the socket the jail's listener goes out on.
    pub proxy: Option<OwnedFd>,
    /// python's fd 3.
    pub channel: Option<OwnedFd>,
}

pub struct Prepared<'a> {
    pub spec: &'a JobSpec,
    pub variant: Variant,
    pub filters: Filters,
    pub cap_last_cap: u32,
    pub memory_backstop: bool,
    /// v1 `tasks` files, opened by the jailer, that the init writes "0"
    /// into to join its job cgroup.
    pub self_attach: Vec<(PathBuf, OwnedFd)>,
}

/// Entry point of the cloned child. Never returns.
pub fn run(mut p: Prepared<'_>, mut fds: InitFds) -> ! {
    let self_attach = std::mem::take(&mut p.self_attach);
    let code = match setup_and_supervise(&p, self_attach, &mut fds) {
        Ok(code) => code,
        Err(e) => {
            report::send(fds.report.as_fd(), &Report::SetupFailed(e.to_setup_error()));
            1
        }
    };
    // SAFETY: _exit skips destructors and atexit handlers, as a forked child must.
    unsafe { libc::_exit(code) }
}

pub(crate) fn wait_release(fds: &InitFds) -> Result<(), JailError> {
    let mut b = [0u8; 1];
    loop {
        // SAFETY: reading one byte into a live buffer.
        let n = unsafe { libc::read(fds.release.as_raw_fd(), b.as_mut_ptr().cast(), 1) };
        match n {
            1 => return Ok(()),
            0 => return Err(JailError::ParentGone),
            _ if Errno::last() == Errno::EINTR => continue,
            _ => return Err(JailError::ParentGone),
        }
    }
}

pub(crate) fn set_pdeathsig() -> Result<(), JailError> {
    // SAFETY: prctl with integer arguments only.
    if unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        )
    } < 0
    {
        return Err(JailError::Pdeathsig(Errno::last()));
    }
    Ok(())
}

pub(crate) fn set_fs_identity() -> Result<(), JailError> {
    // setfsuid reports the previous value, so a second call confirms the first.
    // SAFETY: setfsuid/setfsgid have no memory-safety preconditions.
    unsafe {
        libc::setfsgid(JAIL_UID);
        libc::setfsuid(JAIL_UID);
        if libc::setfsuid(u32::MAX) as u32 != JAIL_UID
            || libc::setfsgid(u32::MAX) as u32 != JAIL_UID
        {
            return Err(JailError::SetFsId(Errno::EPERM));
        }
    }
    Ok(())
}

fn setup_and_supervise(
    p: &Prepared<'_>,
    self_attach: Vec<(PathBuf, OwnedFd)>,
    fds: &mut InitFds,
) -> Result<i32, JailError> {
    let spec = p.spec;
    // Set before waiting, so a jailer that dies early takes us with it.
    set_pdeathsig()?;
    wait_release(fds)?;
    // Each file is closed as soon as it has served.
    for (path, tasks) in self_attach {
        nix::unistd::write(&tasks, b"0")
            .map_err(|errno| JailError::CgroupSelfAttach { path, errno })?;
    }
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWCGROUP)
        .map_err(JailError::UnshareCgroup)?;
    nix::unistd::setsid().map_err(JailError::Setsid)?;
    nix::mount::mount(
        None::<&str>,
        "/",
        None::<&str>,
        nix::mount::MsFlags::MS_REC | nix::mount::MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(JailError::MakePrivate)?;
    let sources = rootfs::open_sources(spec)?;
    set_fs_identity()?;
    rootfs::build(spec, &p.variant, sources)?;
    net::bring_up(spec, fds.proxy.as_ref())?;
    nix::unistd::sethostname("sandbox").map_err(JailError::Hostname)?;
    if p.variant.per_user_rlimits {
        privs::set_rlimits(&spec.limits, p.memory_backstop)?;
    } else {
        privs::set_rlimits_but_per_user(&spec.limits, p.memory_backstop)?;
    }
    privs::drop_capabilities(p.cap_last_cap)?;
    // A credential change clears the parent-death signal: set it again.
    set_pdeathsig()?;
    let (enforcement, abi) = if p.variant.landlock {
        landlock_rules::apply(&landlock_access(spec), spec.landlock_required)?
    } else {
        (
            prims_protocol::jail::Enforcement::None,
            prims_syscalls::landlock_abi(),
        )
    };
    report::send(fds.report.as_fd(), &Report::Landlock { enforcement, abi });
    // SAFETY: prctl with integer arguments only; keeps python from reading our memory.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };

    let program = program(spec)?;
    // SAFETY: this process is single-threaded, so fork is sound.
    match unsafe { fork() }.map_err(JailError::Fork)? {
        ForkResult::Child => exec_python(&p.filters, &program, fds, p.variant),
        ForkResult::Parent { child } => {
            // Only python may hold the output pipes and the channel, so
            // they close when it ends, however long this process lingers.
            redirect_stdio_to_null();
            drop(fds.channel.take());
            Ok(reap_until(child, fds))
        }
    }
}

pub(crate) fn redirect_stdio_to_null() {
    // SAFETY: open/dup2/close on fds this process owns.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        if null >= 0 {
            for fd in 0..=2 {
                libc::dup2(null, fd);
            }
            libc::close(null);
        }
    }
}

fn exec_python(filters: &Filters, program: &Program, fds: &InitFds, variant: Variant) -> ! {
    // python reads nothing: stdin is /dev/null.
    // SAFETY: open/dup2 on fds this process owns.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
        if null >= 0 {
            libc::dup2(null, 0);
            libc::close(null);
        }
    }
    let held = inherit::Held {
        channel: fds.channel.as_ref().map(AsFd::as_fd),
        report: fds.report.as_fd(),
    };
    let moved = match inherit::report_off_channel(held) {
        Ok(moved) => moved,
        Err(e) => fail_exec(fds.report.as_fd(), e),
    };
    let report = moved.as_ref().map_or(fds.report.as_fd(), |m| m.as_fd());
    if let Err(e) = inherit::lay_out(held) {
        fail_exec(report, e);
    }
    if let Err(e) = signals::reset_for_exec() {
        fail_exec(report, e);
    }
    if let Err(errno) = nix::unistd::chdir("/workspace") {
        fail_exec(
            report,
            JailError::Chdir {
                path: "/workspace".into(),
                errno,
            },
        );
    }
    if let Err(e) = privs::become_jail_user() {
        fail_exec(report, e);
    }
    // After the id change, which clears it.
    if variant.python_dies_with_init {
        if let Err(e) = set_pdeathsig() {
            fail_exec(report, e);
        }
    }
    if let Err(e) = filters.apply() {
        fail_exec(report, e);
    }
    let argv_ptrs = null_terminated(&program.argv);
    let env_ptrs = null_terminated(&program.envp);
    // SAFETY: both arrays are NULL-terminated and point at live CStrings.
    unsafe { libc::execve(argv_ptrs[0], argv_ptrs.as_ptr(), env_ptrs.as_ptr()) };
    let errno = Errno::last();
    // What execve ran: python, or the program a spec's argv names.
    let path = program
        .argv
        .first()
        .map_or_else(|| PYTHON.to_string(), |p| p.to_string_lossy().into_owned());
    fail_exec(report, JailError::Exec { path, errno })
}

/// Report why python could not be started, and leave the forked child.
fn fail_exec(report: BorrowedFd<'_>, e: JailError) -> ! {
    report::send(report, &Report::SetupFailed(e.to_setup_error()));
    // SAFETY: leaving a forked child without running destructors.
    unsafe { libc::_exit(127) }
}

/// The array of pointers `execve` takes; valid while `strings` lives.
fn null_terminated(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// Reap everything; return when python (pid 2) has ended, after reporting how.
pub(crate) fn reap_until(python: Pid, fds: &InitFds) -> i32 {
    loop {
        match waitpid(None, None) {
            Ok(WaitStatus::Exited(pid, code)) if pid == python => {
                report::send(fds.report.as_fd(), &Report::Exited(code));
                return 0;
            }
            Ok(WaitStatus::Signaled(pid, sig, _)) if pid == python => {
                report::send(fds.report.as_fd(), &Report::Signaled(sig as i32));
                return 0;
            }
            Ok(_) | Err(Errno::EINTR) => continue,
            Err(_) => return 1,
        }
    }
}
