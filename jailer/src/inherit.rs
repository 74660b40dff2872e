//! Lays out the fds python inherits, as [`crate::plan::python_fds`] decides, in
//! the forked child just before the exec.

use crate::error::JailError;
use crate::plan::python_fds::{python_fds, ChannelOnto3, PythonFds, CHANNEL_FD};
use crate::sys;
use nix::errno::Errno;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

fn fail(call: &'static str) -> impl Fn(Errno) -> JailError {
    move |errno| JailError::PythonFds { call, errno }
}

/// The init's fds that matter here: the channel python gets, and the
/// report pipe to tell of a failure on.
#[derive(Clone, Copy)]
pub struct Held<'a> {
    pub channel: Option<BorrowedFd<'a>>,
    pub report: BorrowedFd<'a>,
}

fn plan(held: Held<'_>) -> PythonFds {
    python_fds(
        held.channel.as_ref().map(AsRawFd::as_raw_fd),
        held.report.as_raw_fd(),
    )
}

/// Step 1: a copy of the report pipe off 3 when the channel goes there;
/// from then on the caller reports through that copy, since [`lay_out`]
/// puts the channel over the original.
pub fn report_off_channel(held: Held<'_>) -> Result<Option<OwnedFd>, JailError> {
    if !plan(held).move_report {
        return Ok(None);
    }
    // SAFETY: fcntl on an fd this process holds; the duplicate is owned below.
    let fd = unsafe {
        libc::fcntl(
            held.report.as_raw_fd(),
            libc::F_DUPFD_CLOEXEC,
            CHANNEL_FD + 1,
        )
    };
    if fd < 0 {
        return Err(fail("F_DUPFD_CLOEXEC")(Errno::last()));
    }
    // SAFETY: fd is a fresh duplicate that nothing else owns.
    Ok(Some(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// Step 2: the channel onto 3, blocking and without close-on-exec, every
/// fd above it (every fd from 3 without a channel) close-on-exec.
pub fn lay_out(held: Held<'_>) -> Result<(), JailError> {
    let plan = plan(held);
    let (call, ret) = match plan.channel {
        None => ("", 0),
        // SAFETY: fcntl on an fd this process holds.
        Some(ChannelOnto3::InPlace) => ("F_SETFD", unsafe {
            libc::fcntl(CHANNEL_FD, libc::F_SETFD, 0)
        }),
        // Whatever held 3 (the report pipe, copied off it by step 1;
        // another of the init's pipe ends) is closed by the dup2: python
        // needs none of it.
        // SAFETY: dup2 between fds this process holds.
        Some(ChannelOnto3::Dup2 { from }) => ("dup2", unsafe { libc::dup2(from, CHANNEL_FD) }),
    };
    if ret < 0 {
        return Err(fail(call)(Errno::last()));
    }
    if plan.channel.is_some() {
        blocking(CHANNEL_FD)?;
    }
    sys::close_range(plan.cloexec_from, libc::CLOSE_RANGE_CLOEXEC).map_err(fail("close_range"))
}

/// A caller may hand over its end of a non-blocking socket pair (tokio
/// makes them so); python reads its fd 3 as a plain blocking file. Only
/// the jail's end changes: each end of a pair is its own open file.
fn blocking(fd: RawFd) -> Result<(), JailError> {
    // SAFETY: fcntl on an fd this process holds.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(fail("F_GETFL")(Errno::last()));
    }
    if flags & libc::O_NONBLOCK == 0 {
        return Ok(());
    }
    // SAFETY: fcntl F_SETFL on an fd this process holds takes an integer
    // argument and touches no memory of ours.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(fail("F_SETFL")(Errno::last()));
    }
    Ok(())
}
