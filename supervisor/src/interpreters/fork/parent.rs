//! The socket to python's parent, a forked interpreter's process outside
//! its jail, on which the supervisor asks for a fresh python in place of
//! the one it has (`in_place` drives it; the architecture guide's "Fresh in
//! place"). The parent is as trusted as the template it is a copy of, and
//! nothing in the jail can reach it; its answers
//! (`prims_protocol::fork::FromParent`) are still read strictly and capped.

use nix::sys::socket::{recvmsg, sendmsg, ControlMessage, ControlMessageOwned, MsgFlags};
use prims_protocol::fork::{capped_why, FromParent, ToParent, FROM_CHILD_FDS_MAX, MESSAGE_MAX};
use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// How long the parent may take to kill python, empty the jail and fork.
const FRESH_DEADLINE: Duration = Duration::from_secs(10);

/// Our end of the socket python's parent listens on, and the parent's pid,
/// whose child the fresh python must be.
#[derive(Debug)]
pub(crate) struct Parent {
    sock: AsyncFd<OwnedFd>,
    pub(super) pid: libc::pid_t,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum FreshError {
    #[error("making the new python's pipes and channel: {0}")]
    Io(#[source] std::io::Error),
    #[error("asking its parent: {0}")]
    Ask(#[source] std::io::Error),
    #[error("its parent did not answer within {} s", FRESH_DEADLINE.as_secs())]
    Timeout,
    #[error("its parent could not: {0}")]
    Refused(String),
    #[error("its parent's answer is malformed")]
    Malformed,
    #[error("finding the new python: {0}")]
    Find(String),
    #[error("the new python: {0}")]
    NotReady(String),
}

impl Parent {
    /// `sock` is our end of the pair the template's `fork` frame carried;
    /// `python` the adopted python's `/proc/<pid>`, whose parent this is.
    /// Needs a tokio runtime.
    pub(crate) fn new(sock: OwnedFd, python: BorrowedFd<'_>) -> std::io::Result<Parent> {
        let pid = parent_of(python)?;
        nix::fcntl::fcntl(
            &sock,
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        )?;
        // SAFETY: the AsyncFd owns `sock` for its whole life, and an
        // OwnedFd always returns the same, open descriptor.
        let sock = unsafe { AsyncFd::register(sock) }?;
        Ok(Parent { sock, pid })
    }

    /// Hands the parent the fresh python's stdout, stderr and channel, and
    /// waits for its word that python was replaced: with a pidfd of the
    /// fresh python, when the parent could open one.
    pub(super) async fn fresh(&self, fds: [OwnedFd; 3]) -> Result<Option<OwnedFd>, FreshError> {
        let raw = fds.each_ref().map(|fd| fd.as_raw_fd());
        let ask = serde_json::to_vec(&ToParent::Fresh {})
            .map_err(|e| FreshError::Ask(std::io::Error::other(e)))?;
        let iov = [IoSlice::new(&ask)];
        self.sock
            .async_io(Interest::WRITABLE, |sock| {
                sendmsg::<()>(
                    sock.as_raw_fd(),
                    &iov,
                    &[ControlMessage::ScmRights(&raw)],
                    MsgFlags::MSG_NOSIGNAL,
                    None,
                )
                .map_err(std::io::Error::from)
            })
            .await
            .map_err(FreshError::Ask)?;
        // Only the parent and python may hold them now.
        drop(fds);
        let (answer, pidfd) = tokio::time::timeout(
            FRESH_DEADLINE,
            self.sock.async_io(Interest::READABLE, receive),
        )
        .await
        .map_err(|_| FreshError::Timeout)?
        .map_err(FreshError::Ask)?;
        if answer.is_empty() {
            return Err(FreshError::Refused("it is gone".into()));
        }
        match serde_json::from_slice(&answer).map_err(|_| FreshError::Malformed)? {
            FromParent::Forked { .. } => Ok(pidfd),
            FromParent::Failed { why } => Err(FreshError::Refused(capped_why(&why))),
        }
    }
}

/// One answer of the parent's, and the one fd it may carry (more are
/// closed).
fn receive(sock: &OwnedFd) -> std::io::Result<(Vec<u8>, Option<OwnedFd>)> {
    let mut buf = vec![0u8; MESSAGE_MAX];
    let mut space = nix::cmsg_space!([std::os::fd::RawFd; FROM_CHILD_FDS_MAX]);
    let mut iov = [IoSliceMut::new(&mut buf)];
    let msg = recvmsg::<()>(
        sock.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC | MsgFlags::MSG_DONTWAIT,
    )?;
    let mut fds = Vec::new();
    for cmsg in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(got) = cmsg {
            // SAFETY: SCM_RIGHTS installed these fds in this process just
            // now; nothing else owns them.
            fds.extend(
                got.into_iter()
                    .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
            );
        }
    }
    let n = msg.bytes;
    let truncated = msg
        .flags
        .intersects(MsgFlags::MSG_TRUNC | MsgFlags::MSG_CTRUNC);
    if truncated {
        return Err(std::io::Error::other(
            "an answer over the size the parent's answers have",
        ));
    }
    buf.truncate(n);
    Ok((buf, fds.into_iter().next()))
}

/// The parent pid in the `status` of the process whose `/proc/<pid>` is
/// `proc_dir`.
fn parent_of(proc_dir: BorrowedFd<'_>) -> std::io::Result<libc::pid_t> {
    let path = format!("/proc/self/fd/{}/status", proc_dir.as_raw_fd());
    let status = std::fs::read_to_string(path)?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("PPid:"))
        .and_then(|v| v.trim().parse().ok())
        .filter(|p: &libc::pid_t| *p > 1)
        .ok_or_else(|| std::io::Error::other("python's status names no parent"))
}
