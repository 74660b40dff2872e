//! Drives one prims-jailer process: hands it the spec on fd 3, collects
//! python's stdout and stderr (capped) while it runs, and reads the outcome
//! from fd 4 when it exits.

use prims_protocol::jail::{JobSpec, Outcome, SetupError, Status};
use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const SPEC_FD: RawFd = 3;
/// How long past the wall-time limit a jailer may take before it is killed.
const JAILER_GRACE: Duration = Duration::from_secs(10);
const OUTCOME_FD: RawFd = 4;
/// In proxy mode: the Unix socket the jail's listener arrives on.
const PROXY_FD: RawFd = 5;

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
            // SAFETY: as in cancel().
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

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("creating a memfd for the job spec")]
    Memfd(#[source] io::Error),
    #[error("starting the jailer {path}")]
    Spawn {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("encoding the job spec")]
    Encode(#[from] serde_json::Error),
    #[error("passing the proxy channel to the jailer")]
    ProxyChannel(#[source] io::Error),
    #[error("waiting for the jailer")]
    Wait(#[source] io::Error),
}

fn memfd(name: &std::ffi::CStr) -> Result<File, RunError> {
    // SAFETY: name is NUL-terminated; the fd is owned by the returned File.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(RunError::Memfd(io::Error::last_os_error()));
    }
    // Keep clear of 3 and 4, which the child's dup2 targets.
    // SAFETY: fcntl on a valid fd; the duplicate is owned by the File.
    let high = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10) };
    let err = io::Error::last_os_error();
    // SAFETY: fd is ours and no longer needed.
    unsafe { libc::close(fd) };
    if high < 0 {
        return Err(RunError::Memfd(err));
    }
    // SAFETY: high is a fresh fd nothing else owns.
    Ok(unsafe { File::from_raw_fd(high) })
}

/// `fd` moved to 10 or above, close-on-exec, clear of the child's dup2 targets.
fn high_fd(fd: std::os::fd::OwnedFd) -> Result<File, RunError> {
    // SAFETY: fcntl on a valid fd; the duplicate is owned by the File.
    let high = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 10) };
    if high < 0 {
        return Err(RunError::ProxyChannel(io::Error::last_os_error()));
    }
    // SAFETY: high is a fresh fd nothing else owns.
    Ok(unsafe { File::from_raw_fd(high) })
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
    let mut spec_file = memfd(c"prims-spec")?;
    spec_file
        .write_all(&serde_json::to_vec(spec)?)
        .and_then(|_| spec_file.rewind())
        .map_err(RunError::Memfd)?;
    let mut outcome_file = memfd(c"prims-outcome")?;
    let spec_raw = spec_file.as_raw_fd();
    let out_raw = outcome_file.as_raw_fd();

    let proxy = proxy.map(high_fd).transpose()?;
    let proxy_raw = proxy.as_ref().map(|f| f.as_raw_fd());
    let mut cmd = Command::new(jailer);
    cmd.args(["--spec-fd", "3", "--outcome-fd", "4"]);
    if proxy.is_some() {
        cmd.args(["--proxy-fd", "5"]);
    }
    cmd.env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: dup2 is async-signal-safe; the sources are ≥ 10, so they never
    // collide with the targets.
    unsafe {
        cmd.pre_exec(move || {
            let pairs = [
                (Some(spec_raw), SPEC_FD),
                (Some(out_raw), OUTCOME_FD),
                (proxy_raw, PROXY_FD),
            ];
            for (src, dst) in pairs {
                if let Some(src) = src {
                    if libc::dup2(src, dst) < 0 {
                        return Err(io::Error::last_os_error());
                    }
                }
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|source| RunError::Spawn {
        path: jailer.to_path_buf(),
        source,
    })?;
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
    drop(spec_file);
    drop(proxy);
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
    let mut json = Vec::new();
    let read = outcome_file
        .rewind()
        .and_then(|_| outcome_file.read_to_end(&mut json));
    let outcome = match (read, serde_json::from_slice::<Outcome>(&json)) {
        (Ok(_), Ok(o)) => o,
        _ if watchdog.killed() => hung_jailer(limit),
        _ => crashed_jailer(status),
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

fn hung_jailer(limit: Duration) -> Outcome {
    Outcome {
        status: Status::SetupError,
        setup_error: Some(SetupError {
            step: "jailer".into(),
            errno: None,
            message: format!(
                "jailer: the jailer did not finish within {} s and was killed",
                limit.as_secs()
            ),
        }),
        ..Default::default()
    }
}

fn crashed_jailer(status: std::process::ExitStatus) -> Outcome {
    let how = match (status.code(), status.signal()) {
        (Some(c), _) => format!("exited with code {c}"),
        (_, Some(s)) => format!("was killed by signal {s}"),
        _ => "ended".to_string(),
    };
    Outcome {
        status: Status::SetupError,
        setup_error: Some(SetupError {
            step: "jailer".into(),
            errno: None,
            message: format!("jailer: the jailer {how} without reporting an outcome"),
        }),
        ..Default::default()
    }
}
