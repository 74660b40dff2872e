//! Messages with the template's forked child over the `SOCK_SEQPACKET`
//! socket the supervisor handed us (`prims_protocol::fork`'s [`ToChild`]
//! and [`FromChild`]), with fds (`SCM_RIGHTS`) and the kernel's word on
//! the sender's pid (`SCM_CREDENTIALS`). The child is as trusted as its
//! template, no more: every message is bounded in size and time and read
//! strictly.

use crate::error::JailError;
use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{
    recvmsg, sendmsg, setsockopt, sockopt, ControlMessage, ControlMessageOwned, MsgFlags,
};
use prims_protocol::fork::{capped_why, FromChild, ToChild, FROM_CHILD_FDS_MAX, MESSAGE_MAX};
use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

/// One message received.
pub struct Received {
    pub body: FromChild,
    pub fds: Vec<OwnedFd>,
    /// The sender's pid, as the kernel saw it, when it came with one.
    pub pid: Option<libc::pid_t>,
}

fn call(call: &'static str) -> impl Fn(Errno) -> JailError {
    move |errno| JailError::AdoptCall { call, errno }
}

/// Ask the kernel to attach the sender's credentials to what we receive.
pub fn pass_credentials(sock: BorrowedFd<'_>) -> Result<(), JailError> {
    setsockopt(&sock, sockopt::PassCred, &true).map_err(call("SO_PASSCRED"))
}

pub fn send(sock: BorrowedFd<'_>, body: &ToChild, fds: &[RawFd]) -> Result<(), JailError> {
    let bytes = serde_json::to_vec(body).map_err(|e| JailError::AdoptPeer(e.to_string()))?;
    let iov = [IoSlice::new(&bytes)];
    let cmsg = [ControlMessage::ScmRights(fds)];
    let cmsgs: &[ControlMessage] = if fds.is_empty() { &[] } else { &cmsg };
    loop {
        match sendmsg::<()>(sock.as_raw_fd(), &iov, cmsgs, MsgFlags::MSG_NOSIGNAL, None) {
            Ok(_) => return Ok(()),
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(call("sendmsg")(e)),
        }
    }
}

/// The next message, within `deadline`. A message that was cut, carries
/// too many fds or is not one of [`FromChild`] is refused, and so is
/// [`FromChild::Failed`], as the error it reports.
pub fn recv(sock: BorrowedFd<'_>, deadline: Instant) -> Result<Received, JailError> {
    wait_readable(sock, deadline)?;
    let mut buf = vec![0u8; MESSAGE_MAX];
    let mut space = nix::cmsg_space!([RawFd; FROM_CHILD_FDS_MAX], libc::ucred);
    let (n, flags, fds, pid) = {
        let mut iov = [IoSliceMut::new(&mut buf)];
        let msg = loop {
            match recvmsg::<()>(
                sock.as_raw_fd(),
                &mut iov,
                Some(&mut space),
                MsgFlags::MSG_CMSG_CLOEXEC,
            ) {
                Ok(m) => break m,
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(call("recvmsg")(e)),
            }
        };
        let mut fds = Vec::new();
        let mut pid = None;
        for c in msg.cmsgs().map_err(call("recvmsg"))? {
            match c {
                ControlMessageOwned::ScmRights(list) => {
                    // SAFETY: the kernel just installed these fds for us.
                    fds.extend(
                        list.into_iter()
                            .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
                    )
                }
                ControlMessageOwned::ScmCredentials(c) => pid = Some(c.pid()),
                _ => {}
            }
        }
        (msg.bytes, msg.flags, fds, pid)
    };
    if n == 0 {
        return Err(JailError::AdoptPeer("the child closed its socket".into()));
    }
    if flags.intersects(MsgFlags::MSG_TRUNC | MsgFlags::MSG_CTRUNC)
        || fds.len() > FROM_CHILD_FDS_MAX
    {
        return Err(JailError::AdoptPeer(
            "a message was cut or carried too many fds".into(),
        ));
    }
    let body: FromChild = serde_json::from_slice(&buf[..n])
        .map_err(|e| JailError::AdoptPeer(format!("a malformed message: {e}")))?;
    if let FromChild::Failed { why } = body {
        return Err(JailError::AdoptPeer(format!(
            "it failed: {}",
            capped_why(&why)
        )));
    }
    Ok(Received { body, fds, pid })
}

/// The next message, which must be `want` and carry no fds.
pub fn expect(
    sock: BorrowedFd<'_>,
    want: FromChild,
    deadline: Instant,
) -> Result<Received, JailError> {
    let r = recv(sock, deadline)?;
    if r.body != want {
        return Err(JailError::AdoptPeer(format!(
            "expected {want:?}, got {:?}",
            r.body
        )));
    }
    if !r.fds.is_empty() {
        return Err(JailError::AdoptPeer(format!("its {want:?} carried fds")));
    }
    Ok(r)
}

fn wait_readable(sock: BorrowedFd<'_>, deadline: Instant) -> Result<(), JailError> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(JailError::AdoptPeer("no answer in time".into()));
        }
        let ms = u16::try_from(left.as_millis().min(u128::from(u16::MAX))).unwrap_or(u16::MAX);
        let mut fds = [PollFd::new(sock.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(ms)) {
            Ok(0) | Err(Errno::EINTR) => continue,
            Ok(_) => return Ok(()),
            Err(e) => return Err(call("poll")(e)),
        }
    }
}

/// How long each step of the child may take.
pub const STEP: Duration = Duration::from_secs(10);
