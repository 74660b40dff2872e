//! The socket to K, a forked interpreter's python's parent outside its
//! jail, on which the supervisor asks for a fresh python in place of the
//! one it has (`in_place` drives it; the architecture guide's "Fresh in
//! place"). K is as trusted as the template it is a copy of, and nothing in
//! the jail can reach it; its answers are still read strictly and capped.

use nix::sys::socket::{recvmsg, sendmsg, ControlMessage, ControlMessageOwned, MsgFlags};
use serde::Deserialize;
use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// How long K may take to kill python, have the jail emptied and fork.
const RESPAWN_DEADLINE: Duration = Duration::from_secs(10);
/// K's answers are a line of JSON.
const ANSWER_MAX: usize = 4096;

/// Our end of the socket K listens on, and K's pid, whose child the new
/// python must be.
#[derive(Debug)]
pub(crate) struct Respawner {
    sock: AsyncFd<OwnedFd>,
    pub(super) parent: libc::pid_t,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum RespawnError {
    #[error("making the new python's pipes and channel: {0}")]
    Io(#[source] std::io::Error),
    #[error("asking its parent: {0}")]
    Ask(#[source] std::io::Error),
    #[error("its parent did not answer within {} s", RESPAWN_DEADLINE.as_secs())]
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

#[derive(Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
enum Answer {
    Respawned {
        #[allow(dead_code)]
        pid: u32,
    },
    Failed {
        why: String,
    },
}

impl Respawner {
    /// `sock` is our end of the pair the template's `fork` frame carried;
    /// `python` the adopted python's `/proc/<pid>`, whose parent is K.
    /// Needs a tokio runtime.
    pub(crate) fn new(sock: OwnedFd, python: BorrowedFd<'_>) -> std::io::Result<Respawner> {
        let parent = parent_of(python)?;
        nix::fcntl::fcntl(
            &sock,
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        )?;
        // SAFETY: the AsyncFd owns `sock` for its whole life, and an
        // OwnedFd always returns the same, open descriptor.
        let sock = unsafe { AsyncFd::register(sock) }?;
        Ok(Respawner { sock, parent })
    }

    /// Hands K the new python's stdout, stderr and channel, and waits for
    /// its word that python was replaced: with a pidfd of the new python,
    /// when K could open one.
    pub(super) async fn ask(&self, fds: [OwnedFd; 3]) -> Result<Option<OwnedFd>, RespawnError> {
        let raw = fds.each_ref().map(|fd| fd.as_raw_fd());
        let iov = [IoSlice::new(br#"{"op":"respawn"}"#)];
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
            .map_err(RespawnError::Ask)?;
        // Only K and python may hold them now.
        drop(fds);
        let (answer, pidfd) = tokio::time::timeout(
            RESPAWN_DEADLINE,
            self.sock.async_io(Interest::READABLE, receive),
        )
        .await
        .map_err(|_| RespawnError::Timeout)?
        .map_err(RespawnError::Ask)?;
        if answer.is_empty() {
            return Err(RespawnError::Refused("it is gone".into()));
        }
        match serde_json::from_slice(&answer).map_err(|_| RespawnError::Malformed)? {
            Answer::Respawned { .. } => Ok(pidfd),
            Answer::Failed { why } => Err(RespawnError::Refused(cap(why))),
        }
    }
}

/// One answer of K's, and the one fd it may carry (more are closed).
fn receive(sock: &OwnedFd) -> std::io::Result<(Vec<u8>, Option<OwnedFd>)> {
    let mut buf = vec![0u8; ANSWER_MAX];
    let mut space = nix::cmsg_space!([std::os::fd::RawFd; 2]);
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
            "an answer over the size K's answers have",
        ));
    }
    buf.truncate(n);
    Ok((buf, fds.into_iter().next()))
}

fn cap(mut why: String) -> String {
    if why.len() > 512 {
        let mut end = 512;
        while !why.is_char_boundary(end) {
            end -= 1;
        }
        why.truncate(end);
    }
    why
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
