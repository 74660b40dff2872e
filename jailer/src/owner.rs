//! The jail's user namespace is created while the jailer's effective ids are
//! the job's host uid and gid: the kernel makes the creator's euid the
//! namespace's owner, and charges the jail's per-user kernel counts
//! (inotify instances and watches, namespaces, ...) to that owner at the
//! host level. Created by root, a jail could spend host root's budget.
//!
//! Only the effective ids change, and only around the clone:
//! - `SECBIT_NO_SETUID_FIXUP` keeps the effective capabilities the clone
//!   needs (`CAP_SYS_ADMIN` where unprivileged user namespaces are
//!   restricted). A new user namespace resets the child's securebits, so
//!   none of this reaches the jail.
//! - The real and saved uids stay root. The kernel sizes the jail's
//!   `RLIMIT_NPROC` ceiling from its creator's real uid (none for root), and
//!   the init keeps them as ids the jail cannot name, which puts it out of
//!   python's reach: `kill`, `prlimit` and `ptrace` compare them.
//! - The filesystem ids go back to root's, so the init opens its bind
//!   sources and `CLONE_INTO_CGROUP` checks the cgroup as before.

use crate::error::JailError;
use crate::sys::{self, Forked};
use nix::errno::Errno;
use nix::unistd::{getresgid, getresuid, setresgid, setresuid, Gid, Uid};
use std::os::fd::AsFd;

/// `-1` for the set*id calls: leave this id as it is.
const KEEP: u32 = u32::MAX;

struct Saved {
    euid: u32,
    egid: u32,
    securebits: libc::c_int,
}

/// Clone with `uid`/`gid` as the effective ids, then restore the jailer's.
/// The child returns at once with the credentials it was born with.
pub fn clone_as(
    uid: u32,
    gid: u32,
    clone: impl FnOnce() -> Result<Forked, Errno>,
) -> Result<Forked, JailError> {
    let saved = enter(uid, gid)?;
    let forked = clone();
    if let Ok(Forked::Child) = forked {
        return Ok(Forked::Child);
    }
    let restored = leave(&saved);
    match (forked, restored) {
        (Ok(parent), Ok(())) => Ok(parent),
        (Err(errno), Ok(())) => Err(JailError::Clone(errno)),
        (Ok(Forked::Parent { pidfd, .. }), Err(e)) => {
            let _ = sys::pidfd_send_signal(pidfd.as_fd(), libc::SIGKILL);
            let _ = sys::wait_pidfd(pidfd.as_fd());
            Err(e)
        }
        (_, Err(e)) => Err(e),
    }
}

fn fail(call: &'static str) -> impl Fn(Errno) -> JailError {
    move |errno| JailError::CloneIdentity { call, errno }
}

/// Take `uid` and `gid` as the effective ids for good, keeping the
/// capabilities (`SECBIT_NO_SETUID_FIXUP`) and the real and saved ids.
pub fn become_effective(uid: u32, gid: u32) -> Result<(), JailError> {
    set_securebits(securebits()? | libc::SECBIT_NO_SETUID_FIXUP)?;
    setresgid(Gid::from_raw(KEEP), Gid::from_raw(gid), Gid::from_raw(KEEP))
        .map_err(fail("setresgid"))?;
    setresuid(Uid::from_raw(KEEP), Uid::from_raw(uid), Uid::from_raw(KEEP))
        .map_err(fail("setresuid"))
}

fn securebits() -> Result<libc::c_int, JailError> {
    // SAFETY: prctl with integer arguments only.
    let bits = unsafe { libc::prctl(libc::PR_GET_SECUREBITS, 0, 0, 0, 0) };
    if bits < 0 {
        return Err(fail("PR_GET_SECUREBITS")(Errno::last()));
    }
    Ok(bits)
}

fn set_securebits(bits: libc::c_int) -> Result<(), JailError> {
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_SECUREBITS, bits as libc::c_ulong, 0, 0, 0) } < 0 {
        return Err(fail("PR_SET_SECUREBITS")(Errno::last()));
    }
    Ok(())
}

/// setfsuid/setfsgid report the previous value, so a second call confirms.
fn set_fs_ids(uid: u32, gid: u32) -> Result<(), JailError> {
    // SAFETY: setfsuid/setfsgid have no memory-safety preconditions.
    unsafe {
        libc::setfsgid(gid);
        libc::setfsuid(uid);
        if libc::setfsuid(KEEP) as u32 != uid || libc::setfsgid(KEEP) as u32 != gid {
            return Err(fail("setfsuid")(Errno::EPERM));
        }
    }
    Ok(())
}

fn enter(uid: u32, gid: u32) -> Result<Saved, JailError> {
    let saved = Saved {
        euid: getresuid().map_err(fail("getresuid"))?.effective.as_raw(),
        egid: getresgid().map_err(fail("getresgid"))?.effective.as_raw(),
        securebits: securebits()?,
    };
    set_securebits(saved.securebits | libc::SECBIT_NO_SETUID_FIXUP)?;
    let switched = (|| {
        setresgid(Gid::from_raw(KEEP), Gid::from_raw(gid), Gid::from_raw(KEEP))
            .map_err(fail("setresgid"))?;
        setresuid(Uid::from_raw(KEEP), Uid::from_raw(uid), Uid::from_raw(KEEP))
            .map_err(fail("setresuid"))?;
        set_fs_ids(saved.euid, saved.egid)
    })();
    if let Err(e) = switched {
        let _ = leave(&saved);
        return Err(e);
    }
    Ok(saved)
}

fn leave(saved: &Saved) -> Result<(), JailError> {
    // Still privileged: SECBIT_NO_SETUID_FIXUP kept the effective set.
    setresuid(
        Uid::from_raw(KEEP),
        Uid::from_raw(saved.euid),
        Uid::from_raw(KEEP),
    )
    .map_err(fail("setresuid"))?;
    setresgid(
        Gid::from_raw(KEEP),
        Gid::from_raw(saved.egid),
        Gid::from_raw(KEEP),
    )
    .map_err(fail("setresgid"))?;
    set_securebits(saved.securebits)
}
