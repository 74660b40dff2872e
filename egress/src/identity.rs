//! Whom the proxy process runs as. Its effective uid is an account of its
//! own (`prims-egress`), which owns nothing and which the supervisor's
//! socket refuses; its real and saved uids stay host root's, which it
//! cannot name: it runs in a user namespace of its own, owned by root, in
//! which only that account is mapped. The kernel lets one process signal,
//! `prlimit` or trace another by comparing those ids, so no process but
//! root can stop, limit or trace the proxy, not even another of its
//! account's. The jail's init is held the same way.
//!
//! Making the namespace takes two processes: the proxy (in it) and its
//! parent (outside, root), which writes the namespace's id maps, waits for
//! the proxy and exits with it. The parent reads nothing from anyone; its
//! death takes the proxy with it.

use nix::errno::Errno;
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::{fork, pipe2, ForkResult, Pid};
use std::io::{Read, Write};
use std::os::fd::{OwnedFd, RawFd};

/// The account's ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Account {
    pub uid: u32,
    pub gid: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("the account must not be root, nobody or a uid above 2^31 (got uid {0})")]
    Unfit(u32),
    #[error("the proxy must start single-threaded ({0} threads)")]
    Threads(usize),
    #[error("setgroups: {0}")]
    Setgroups(Errno),
    #[error("pipe2: {0}")]
    Pipe(Errno),
    #[error("fork: {0}")]
    Fork(Errno),
    #[error("unshare(CLONE_NEWUSER): {0}")]
    Unshare(Errno),
    #[error("the parent did not map the account: {0}")]
    Sync(String),
    #[error("setresgid to {0}: {1}")]
    Setresgid(u32, Errno),
    #[error("setresuid to {0}: {1}")]
    Setresuid(u32, Errno),
    #[error("dropping capabilities: {0}")]
    Caps(String),
    #[error("prctl(PR_SET_PDEATHSIG): {0}")]
    Pdeathsig(Errno),
    #[error("the ids are not as set: real {real}, effective {effective}")]
    Ids { real: u32, effective: u32 },
}

/// Becomes `account` as described above; returns in the proxy only (the
/// parent exits with it). `keep` is the one fd the parent closes, as only
/// the proxy may hold it (the supervisor's channel: the proxy's end must
/// close when the proxy dies). Call it as root, single-threaded.
pub fn become_account(account: Account, keep: RawFd) -> Result<(), IdentityError> {
    if account.uid == 0 || account.uid == crate::confine::NOBODY || account.uid > i32::MAX as u32 {
        return Err(IdentityError::Unfit(account.uid));
    }
    let threads = threads();
    if threads != 1 {
        return Err(IdentityError::Threads(threads));
    }
    // SAFETY: setgroups with an empty list.
    if unsafe { libc::setgroups(0, std::ptr::null()) } != 0 {
        return Err(IdentityError::Setgroups(Errno::last()));
    }
    let (up_r, up_w) = pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(IdentityError::Pipe)?;
    let (down_r, down_w) = pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(IdentityError::Pipe)?;
    let parent = Pid::this();
    // SAFETY: the process has one thread (checked above), so the child may
    // go on running ordinary code.
    match unsafe { fork() }.map_err(IdentityError::Fork)? {
        ForkResult::Parent { child } => {
            drop((up_w, down_r));
            // SAFETY: `keep` is the proxy's alone from now on.
            unsafe { libc::close(keep) };
            let code = match map(child, account, up_r, down_w) {
                Ok(()) => wait_for(child),
                Err(e) => {
                    eprintln!("prims egress-proxy: mapping its account: {e}");
                    let _ = nix::sys::signal::kill(child, nix::sys::signal::Signal::SIGKILL);
                    let _ = waitpid(child, None);
                    1
                }
            };
            std::process::exit(code)
        }
        ForkResult::Child => {
            drop((up_r, down_w));
            enter(account, up_w, down_r, parent)
        }
    }
}

/// The proxy's side: a new user namespace (owned by root, who makes it),
/// the account's ids once the parent mapped them, no capabilities.
fn enter(account: Account, up: OwnedFd, down: OwnedFd, parent: Pid) -> Result<(), IdentityError> {
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWUSER).map_err(IdentityError::Unshare)?;
    std::fs::File::from(up)
        .write_all(b"u")
        .map_err(|e| IdentityError::Sync(e.to_string()))?;
    let mut byte = [0u8; 1];
    std::fs::File::from(down)
        .read_exact(&mut byte)
        .map_err(|e| IdentityError::Sync(e.to_string()))?;
    let gid = account.gid;
    // SAFETY: plain syscalls on integers.
    if unsafe { libc::setresgid(gid, gid, gid) } != 0 {
        return Err(IdentityError::Setresgid(gid, Errno::last()));
    }
    // Real and saved stay as they are: host root, unmapped here.
    let keep = libc::uid_t::MAX;
    // SAFETY: a plain syscall on integers; it touches no memory of ours.
    if unsafe { libc::setresuid(keep, account.uid, keep) } != 0 {
        return Err(IdentityError::Setresuid(account.uid, Errno::last()));
    }
    drop_capabilities()?;
    // Credential changes clear it, so it comes after them.
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) } != 0 {
        return Err(IdentityError::Pdeathsig(Errno::last()));
    }
    if nix::unistd::getppid() != parent {
        std::process::exit(1);
    }
    // SAFETY: plain getters.
    let (real, effective) = unsafe { (libc::getuid(), libc::geteuid()) };
    if effective != account.uid || real == account.uid {
        return Err(IdentityError::Ids { real, effective });
    }
    Ok(())
}

/// The parent's side: map the account into the child's namespace, once
/// the child made it.
fn map(child: Pid, account: Account, up: OwnedFd, down: OwnedFd) -> Result<(), String> {
    let mut byte = [0u8; 1];
    std::fs::File::from(up)
        .read_exact(&mut byte)
        .map_err(|e| format!("the proxy did not make its namespace: {e}"))?;
    let proc = format!("/proc/{child}");
    let write = |file: &str, text: String| {
        std::fs::write(format!("{proc}/{file}"), text).map_err(|e| format!("{proc}/{file}: {e}"))
    };
    write("setgroups", "deny".into())?;
    write("uid_map", format!("{0} {0} 1\n", account.uid))?;
    write("gid_map", format!("{0} {0} 1\n", account.gid))?;
    std::fs::File::from(down)
        .write_all(b"m")
        .map_err(|e| format!("waking the proxy: {e}"))
}

/// Waits for the proxy; its exit code, or 128 + the signal that killed it.
fn wait_for(child: Pid) -> i32 {
    loop {
        match waitpid(child, None) {
            Ok(WaitStatus::Exited(_, code)) => return code,
            Ok(WaitStatus::Signaled(_, sig, _)) => return 128 + sig as i32,
            Ok(_) | Err(Errno::EINTR) => continue,
            Err(_) => return 1,
        }
    }
}

fn drop_capabilities() -> Result<(), IdentityError> {
    use caps::CapSet;
    let fail = |e: caps::errors::CapsError| IdentityError::Caps(e.to_string());
    // The caps crate may know fewer capabilities than the kernel has.
    let last: u32 = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(63);
    for cap in 0..=last {
        // SAFETY: prctl with integer arguments.
        let r = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) };
        if r < 0 && Errno::last() != Errno::EINVAL {
            return Err(IdentityError::Caps(format!(
                "PR_CAPBSET_DROP {cap}: {}",
                Errno::last()
            )));
        }
    }
    for set in [
        CapSet::Ambient,
        CapSet::Inheritable,
        CapSet::Effective,
        CapSet::Permitted,
    ] {
        caps::clear(None, set).map_err(fail)?;
    }
    Ok(())
}

/// Threads of this process.
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
}
