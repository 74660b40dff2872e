//! A fresh python in the jail of the one it replaces, for a `fresh: true`
//! call whose interpreter was forked from a template and fits the call
//! otherwise. Its parent, outside the jail's pid namespace, confined as
//! python is and never running user code, kills python and all it left
//! in the jail, empties `/tmp`, and forks again ([`super::parent`] is the
//! socket to it). The fresh python takes new stdio and a new channel and
//! says `ready`. Whatever fails, the caller ends the jail and starts a new
//! interpreter (the architecture guide's "Fresh in place").

use super::parent::FreshError;
use crate::interpreters::channel;
use crate::interpreters::live::Live;
use crate::interpreters::pumps::Pump;
use crate::interpreters::settled::MainThread;
use crate::interpreters::start::{demote, inode, wait_ready};
use crate::job::{python_process_in, python_process_of, Layout, Stream};
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

/// The new python's `ready`: it imports nothing, so this is generous.
const READY_DEADLINE: Duration = Duration::from_secs(30);

impl Live {
    /// Whether a fresh python can replace this one in place. In allowlist
    /// mode the jail's listener stays with the egress proxy, which begins
    /// and ends a run of its own for each call, the fresh python's too.
    pub(crate) fn can_be_fresh_in_place(&self) -> bool {
        self.parent.is_some()
    }

    /// Replaces python with a fresh one in the same jail, which then holds
    /// a new interpreter: no cell run, at batch CPU weight.
    pub(crate) async fn fresh_in_place(&mut self) -> Result<(), FreshError> {
        let t0 = Instant::now();
        let Some(parent) = &self.parent else {
            return Err(FreshError::Refused("it was not forked".into()));
        };
        let (writer, mut rx, theirs) = channel::pair().map_err(FreshError::Io)?;
        let channel_ino = inode(&theirs).map_err(FreshError::Io)?;
        let (out_r, out_w) = pipe().map_err(FreshError::Io)?;
        let (err_r, err_w) = pipe().map_err(FreshError::Io)?;
        let pidfd = parent.fresh([out_w, err_w, theirs]).await?;
        let stdout = Pump::start(Stream::Stdout, out_r).map_err(FreshError::Io)?;
        let stderr = Pump::start(Stream::Stderr, err_r).map_err(FreshError::Io)?;
        wait_ready(
            &mut rx,
            &mut self.exit,
            &self.job,
            false,
            t0,
            READY_DEADLINE,
        )
        .await
        .map_err(|e| FreshError::NotReady(e.to_string()))?;
        let parent = parent.pid;
        let python = match pidfd {
            Some(pidfd) => python_process_of(pidfd, parent),
            None => python_process_in(self.kill.pid(), Layout::InPlace { parent }),
        }
        .map_err(|e| FreshError::Find(e.to_string()))?;
        self.writer = writer;
        self.rx = rx;
        self.stdout = stdout;
        self.stderr = stderr;
        self.python = python.pidfd;
        self.main = MainThread::new(python.proc_dir, channel_ino);
        self.cells = 0;
        self.warm = false;
        demote(self);
        tracing::debug!(job = %self.job, us = t0.elapsed().as_micros() as u64, "a fresh python in place");
        Ok(())
    }
}

fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(Into::into)
}
