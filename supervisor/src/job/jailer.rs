//! Drives one prims-jailer process to its end: collects python's stdout
//! and stderr (capped) while it runs, and reads the outcome when it exits.

use super::error::RunError;
use super::{jailer_end, launch};
use prims_protocol::jail::{JobSpec, Outcome};
use std::io::{self, Read};
use std::path::Path;
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long past the wall-time limit a jailer may take before it is killed.
const JAILER_GRACE: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// Cancels a run from another thread by killing its jailer; the jail's init
/// has a parent-death signal, so the whole pid namespace goes with it.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<Mutex<CancelState>>);

#[derive(Debug, Default)]
struct CancelState {
    cancelled: bool,
    /// The jailer's pid while it is unreaped, so a kill never hits a reused pid.
    pid: Option<libc::pid_t>,
    /// A kill was actually sent.
    killed: bool,
}

impl Cancel {
    pub fn cancel(&self) {
        let mut st = self.0.lock().unwrap_or_else(|p| p.into_inner());
        st.cancelled = true;
        if let Some(pid) = st.pid {
            // SAFETY: kill has no memory-safety preconditions; pid is our unreaped child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            st.killed = true;
        }
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).cancelled
    }

    fn started(&self, pid: libc::pid_t) {
        let mut st = self.0.lock().unwrap_or_else(|p| p.into_inner());
        st.pid = Some(pid);
        if st.cancelled {
            // SAFETY: kill has no memory-safety preconditions; pid is our
            // unreaped child, so it names no other process.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }

    fn reaped(&self) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).pid = None;
    }

    fn killed(&self) -> bool {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).killed
    }
}

#[derive(Debug)]
pub struct RunResult {
    pub outcome: Outcome,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    /// The run was cancelled; `outcome` then describes a killed jailer.
    pub cancelled: bool,
}

/// Copy a stream into a capped buffer, passing every chunk to `sink` as it
/// arrives; past the cap, keep draining so python never blocks on a full pipe.
fn pump(
    mut r: impl Read,
    cap: usize,
    stream: Stream,
    sink: &(dyn Fn(Stream, &[u8]) + Sync),
) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut truncated = false;
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let room = cap.saturating_sub(kept.len());
        let take = n.min(room);
        if take > 0 {
            kept.extend_from_slice(&buf[..take]);
            sink(stream, &buf[..take]);
        }
        truncated |= take < n;
    }
    (kept, truncated)
}

/// Runs `spec` with the jailer at `jailer`; `sink` sees output as it
/// arrives. In `NetworkMode::Proxy`, `proxy` is one end of a Unix socket
/// pair: the jail's listener is sent on it once the jail's network is up.
pub(super) fn run(
    jailer: &Path,
    spec: &JobSpec,
    sink: &(dyn Fn(Stream, &[u8]) + Sync),
    cancel: &Cancel,
    proxy: Option<std::os::fd::OwnedFd>,
) -> Result<RunResult, RunError> {
    let launch::Launched {
        mut child,
        outcome: mut outcome_file,
    } = launch::launch(jailer, spec, proxy, None, None)?;
    let pid = child.id() as libc::pid_t;
    cancel.started(pid);
    // The jailer enforces the wall time itself; this catches a jailer that
    // hangs (in setup, say) and would otherwise hold its caller forever.
    let watchdog = Cancel::default();
    watchdog.started(pid);
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let limit = Duration::from_millis(spec.limits.wall_time_ms) + JAILER_GRACE;
    let dog = watchdog.clone();
    let guard = std::thread::spawn(move || {
        if done_rx.recv_timeout(limit) == Err(RecvTimeoutError::Timeout) {
            dog.cancel();
        }
    });
    let cap = usize::try_from(spec.limits.output_bytes).unwrap_or(usize::MAX);
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let ((out, out_trunc), (err, err_trunc)) = std::thread::scope(|s| {
        let t = s.spawn(|| match stderr {
            Some(e) => pump(e, cap, Stream::Stderr, sink),
            None => (Vec::new(), false),
        });
        let o = match stdout {
            Some(o) => pump(o, cap, Stream::Stdout, sink),
            None => (Vec::new(), false),
        };
        (o, t.join().unwrap_or_default())
    });
    let status = child.wait();
    cancel.reaped();
    watchdog.reaped();
    drop(done_tx);
    let _ = guard.join();
    let status = status.map_err(RunError::Wait)?;
    let outcome = match jailer_end::record(&mut outcome_file) {
        Some(o) => o,
        None if watchdog.killed() => jailer_end::hung(limit),
        None => jailer_end::crashed(status),
    };
    Ok(RunResult {
        outcome,
        stdout: out,
        stderr: err,
        stdout_truncated: out_trunc,
        stderr_truncated: err_trunc,
        cancelled: cancel.is_cancelled(),
    })
}
