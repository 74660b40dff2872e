//! The socket to K, a forked interpreter's python's parent outside its
//! jail, on which the supervisor asks for a fresh python in place of the
//! one it has (`in_place` drives it; the architecture guide's "Fresh in
//! place"). K is as trusted as the template it is a copy of, and nothing in
//! the jail can reach it; its answers are still read strictly and capped.

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{recv, sendmsg, ControlMessage, MsgFlags};
use serde::Deserialize;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

/// How long K may take to kill python, have the jail emptied and fork.
const RESPAWN_DEADLINE: Duration = Duration::from_secs(10);
/// K's answers are a line of JSON.
const ANSWER_MAX: usize = 4096;

/// Our end of the socket K listens on, and K's pid, whose child the new
/// python must be.
#[derive(Debug)]
pub(crate) struct Respawner {
    sock: Arc<OwnedFd>,
    pub(super) parent: libc::pid_t,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum RespawnError {
    #[error("making the new python's pipes and channel: {0}")]
    Io(#[source] std::io::Error),
    #[error("asking its parent: {0}")]
    Ask(#[source] nix::Error),
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
    pub(crate) fn new(sock: OwnedFd, python: BorrowedFd<'_>) -> std::io::Result<Respawner> {
        Ok(Respawner {
            sock: Arc::new(sock),
            parent: parent_of(python)?,
        })
    }

    /// Hands K the new python's stdout, stderr and channel, and waits for
    /// its word that python was replaced.
    pub(super) async fn ask(&self, fds: [OwnedFd; 3]) -> Result<(), RespawnError> {
        let sock = self.sock.clone();
        let answer = tokio::task::spawn_blocking(move || exchange(&sock, fds))
            .await
            .map_err(|_| RespawnError::Refused("the exchange did not finish".into()))??;
        match serde_json::from_slice(&answer).map_err(|_| RespawnError::Malformed)? {
            Answer::Respawned { .. } => Ok(()),
            Answer::Failed { why } => Err(RespawnError::Refused(cap(why))),
        }
    }
}

/// One request on K's socket (blocking: it is answered within
/// milliseconds), and its answer.
fn exchange(sock: &OwnedFd, fds: [OwnedFd; 3]) -> Result<Vec<u8>, RespawnError> {
    let raw = fds.each_ref().map(|fd| fd.as_raw_fd());
    let iov = [std::io::IoSlice::new(br#"{"op":"respawn"}"#)];
    sendmsg::<()>(
        sock.as_raw_fd(),
        &iov,
        &[ControlMessage::ScmRights(&raw)],
        MsgFlags::MSG_NOSIGNAL,
        None,
    )
    .map_err(RespawnError::Ask)?;
    // Only K and python may hold them now.
    drop(fds);
    let mut ready = [PollFd::new(sock.as_fd(), PollFlags::POLLIN)];
    let within = PollTimeout::try_from(RESPAWN_DEADLINE).unwrap_or(PollTimeout::MAX);
    match poll(&mut ready, within) {
        Ok(0) => return Err(RespawnError::Timeout),
        Ok(_) => {}
        Err(e) => return Err(RespawnError::Ask(e)),
    }
    let mut buf = vec![0u8; ANSWER_MAX];
    match recv(sock.as_raw_fd(), &mut buf, MsgFlags::MSG_DONTWAIT) {
        Ok(0) => Err(RespawnError::Refused("it is gone".into())),
        Ok(n) => {
            buf.truncate(n);
            Ok(buf)
        }
        Err(e) => Err(RespawnError::Ask(e)),
    }
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
