//! A jail that outlives the call that started it: a live interpreter's.
//! Its owner reads python's output, talks to it over the channel, signals
//! it, and ends it; nothing here watches it. The jailer still enforces the
//! spec's wall and CPU time, as a cap on the jail's whole life.

use super::cgroup_parents::{self, Parents};
use super::jailer_end;
use super::launch::{JailerProcess, Launched};
use super::python_pid::{self, PythonPidError};
use prims_protocol::jail::{Outcome, Status};
use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A running jail, from [`Jails::spawn`](super::Jails::spawn). Dropped
/// without [`Spawned::wait`], it is killed and reaped on a thread of its
/// own.
#[derive(Debug)]
pub struct Spawned {
    pid: libc::pid_t,
    stdout: Option<OwnedFd>,
    stderr: Option<OwnedFd>,
    /// A kill was sent while the jailer was unreaped.
    killed: Arc<AtomicBool>,
    /// The jailer's pidfd, for kills from other threads while `wait` runs.
    pidfd: Option<Arc<OwnedFd>>,
    /// Taken by `wait`, or by `drop` when `wait` never ran.
    running: Option<Running>,
}

/// What it takes to see the jail to its end.
#[derive(Debug)]
struct Running {
    child: JailerProcess,
    outcome: File,
    job: String,
    parents: Parents,
}

impl Spawned {
    pub(super) fn new(launched: Launched, parents: Parents, job: String) -> Spawned {
        let Launched { mut child, outcome } = launched;
        let pid = child.id() as libc::pid_t;
        Spawned {
            pid,
            pidfd: pidfd_open(pid).map(Arc::new),
            stdout: child.stdout.take().map(OwnedFd::from),
            stderr: child.stderr.take().map(OwnedFd::from),
            killed: Arc::new(AtomicBool::new(false)),
            running: Some(Running {
                child,
                outcome,
                job,
                parents,
            }),
        }
    }

    /// The jailer's pid.
    pub fn pid(&self) -> libc::pid_t {
        self.pid
    }

    /// Read end of python's stdout pipe (blocking; close-on-exec), once.
    pub fn take_stdout(&mut self) -> Option<OwnedFd> {
        self.stdout.take()
    }

    /// Read end of python's stderr pipe, which also carries the jailer's
    /// own complaints; once.
    pub fn take_stderr(&mut self) -> Option<OwnedFd> {
        self.stderr.take()
    }

    /// A pidfd of the jail's python (pid 2 in the jail), checked to be
    /// python after it was opened, so a signal through it never reaches
    /// another process. Errors while python is not (yet, or any longer)
    /// running.
    pub fn python_pidfd(&self) -> Result<OwnedFd, PythonPidError> {
        python_pid::python_pidfd(self.pid)
    }

    /// SIGKILL the jailer: the init's parent-death signal takes the whole
    /// pid namespace with it.
    pub fn kill(&self) {
        // SAFETY: kill has no memory-safety preconditions. The jailer is
        // our child and only `wait` or `drop`, which take `self`, reap it,
        // so its pid names no other process.
        if unsafe { libc::kill(self.pid, libc::SIGKILL) } == 0 {
            self.killed.store(true, Ordering::Relaxed);
        }
    }

    /// A handle that kills this jail from anywhere, even after `wait` took
    /// the `Spawned` to another thread: it signals through the jailer's
    /// pidfd, which never names another process.
    pub fn killer(&self) -> JailKiller {
        JailKiller {
            pidfd: self.pidfd.clone(),
            pid: self.pid,
            killed: self.killed.clone(),
        }
    }

    /// Blocks until the jailer exits and returns how the jail ended: the
    /// jailer's record; without one, a SIGKILL after [`Spawned::kill`], else
    /// a `setup_error` naming how the jailer ended. Then removes the job
    /// cgroup if the jailer could not.
    pub fn wait(mut self) -> Outcome {
        let killed = self.killed.load(Ordering::Relaxed);
        match self.running.take() {
            Some(running) => running.finish(killed),
            None => jailer_end::unwaitable(&std::io::Error::from_raw_os_error(libc::ECHILD)),
        }
    }
}

impl Running {
    fn finish(mut self, killed: bool) -> Outcome {
        let status = self.child.wait();
        let outcome = match (jailer_end::record(&mut self.outcome), status) {
            (Some(o), _) => o,
            (None, _) if killed => jailer_end::killed(),
            (None, Ok(status)) => jailer_end::crashed(status),
            (None, Err(e)) => jailer_end::unwaitable(&e),
        };
        if killed || outcome.status == Status::SetupError {
            cgroup_parents::remove_leftover(&self.parents, &self.job);
        }
        outcome
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let Some(running) = self.running.take() else {
            return;
        };
        self.kill();
        let killed = self.killed.load(Ordering::Relaxed);
        let reaper = std::thread::Builder::new()
            .name("prims-jail-reaper".into())
            .spawn(move || running.finish(killed));
        if let Err(e) = reaper {
            tracing::warn!(error = %e, jailer = self.pid, "no thread to reap a dropped jail; it stays a zombie until exit");
        }
    }
}

/// Kills one jail; see [`Spawned::killer`].
#[derive(Debug, Clone)]
pub struct JailKiller {
    pidfd: Option<Arc<OwnedFd>>,
    pid: libc::pid_t,
    killed: Arc<AtomicBool>,
}

impl JailKiller {
    /// The jailer's pid.
    pub fn pid(&self) -> libc::pid_t {
        self.pid
    }

    /// SIGKILL the jailer (a no-op once it has exited).
    pub fn kill(&self) {
        let Some(fd) = &self.pidfd else {
            tracing::warn!(
                jailer = self.pid,
                "no pidfd for this jail; it cannot be killed from here"
            );
            return;
        };
        // SAFETY: a live pidfd, no siginfo; a pidfd never names a reused pid.
        let r = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                fd.as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
        if r == 0 {
            self.killed.store(true, Ordering::Relaxed);
        }
    }
}

fn pidfd_open(pid: libc::pid_t) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        tracing::warn!(jailer = pid, error = %std::io::Error::last_os_error(), "pidfd_open of a jailer failed");
        return None;
    }
    // SAFETY: the kernel returned a new pidfd (close-on-exec) nothing else owns.
    Some(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}
