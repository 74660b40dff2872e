//! Starting one prims-jailer process with its fds in place: the spec on
//! fd 3, the outcome memfd on fd 4, in proxy mode the proxy socket on fd 5,
//! a live interpreter's channel on fd 6, and a fork template's child's
//! socket on fd 7. python's stdout and stderr are
//! the jailer's, piped to us. Its argv[0] is the bare program name: the
//! jail sees the init's command line.

use super::error::RunError;
use prims_protocol::jail::JobSpec;
use std::fs::File;
use std::io::{self, Seek, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

const SPEC_FD: RawFd = 3;
const OUTCOME_FD: RawFd = 4;
/// In proxy mode: the Unix socket the jail's listener arrives on.
const PROXY_FD: RawFd = 5;
/// A live interpreter's channel, which the jailer hands to python as its fd 3.
const CHANNEL_FD: RawFd = 6;
/// The socket to a fork template's child, which the jailer adopts.
const ADOPT_FD: RawFd = 7;
/// Where the sources of the child's dup2s wait, clear of every target.
const HIGH_FDS: RawFd = 10;
/// The jailer's argv[0], in place of its host path.
const JAILER_ARG0: &str = "prims-jailer";

/// A started jailer and the memfd it writes its outcome record to.
#[derive(Debug)]
pub(super) struct Launched {
    pub child: Child,
    pub outcome: File,
}

/// `fd` duplicated to [`HIGH_FDS`] or above, close-on-exec, clear of the
/// child's dup2 targets; `err` names what it was for.
fn high_fd(fd: RawFd, err: fn(io::Error) -> RunError) -> Result<File, RunError> {
    // SAFETY: fcntl on a valid fd; the duplicate is owned by the File.
    let high = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, HIGH_FDS) };
    if high < 0 {
        return Err(err(io::Error::last_os_error()));
    }
    // SAFETY: high is a fresh fd nothing else owns.
    Ok(unsafe { File::from_raw_fd(high) })
}

fn memfd(name: &std::ffi::CStr) -> Result<File, RunError> {
    // SAFETY: name is NUL-terminated; the fd is closed below.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(RunError::Memfd(io::Error::last_os_error()));
    }
    // SAFETY: fd is a fresh memfd that nothing else owns.
    let low = unsafe { OwnedFd::from_raw_fd(fd) };
    high_fd(low.as_raw_fd(), RunError::Memfd)
}

/// Starts the jailer at `jailer` on `spec`. `proxy` and `channel` are
/// handed over; this process keeps no copy of them.
pub(super) fn launch(
    jailer: &Path,
    spec: &JobSpec,
    proxy: Option<OwnedFd>,
    channel: Option<OwnedFd>,
    adopt: Option<OwnedFd>,
) -> Result<Launched, RunError> {
    let mut spec_file = memfd(c"prims-spec")?;
    spec_file
        .write_all(&serde_json::to_vec(spec)?)
        .and_then(|_| spec_file.rewind())
        .map_err(RunError::Memfd)?;
    let outcome = memfd(c"prims-outcome")?;
    let proxy = proxy
        .map(|fd| high_fd(fd.as_raw_fd(), RunError::ProxyChannel))
        .transpose()?;
    let channel = channel
        .map(|fd| high_fd(fd.as_raw_fd(), RunError::Channel))
        .transpose()?;
    let adopt = adopt
        .map(|fd| high_fd(fd.as_raw_fd(), RunError::Channel))
        .transpose()?;
    let pairs = [
        (Some(spec_file.as_raw_fd()), SPEC_FD),
        (Some(outcome.as_raw_fd()), OUTCOME_FD),
        (proxy.as_ref().map(AsRawFd::as_raw_fd), PROXY_FD),
        (channel.as_ref().map(AsRawFd::as_raw_fd), CHANNEL_FD),
        (adopt.as_ref().map(AsRawFd::as_raw_fd), ADOPT_FD),
    ];
    let mut cmd = Command::new(jailer);
    // The jail's init is this process after its clone, and its command line
    // is /proc/1/cmdline to the jailed code: the bare name and fd numbers
    // say nothing of the host (the spec travels on SPEC_FD).
    cmd.arg0(JAILER_ARG0)
        .args(["--spec-fd", "3", "--outcome-fd", "4"]);
    if proxy.is_some() {
        cmd.args(["--proxy-fd", "5"]);
    }
    if channel.is_some() {
        cmd.args(["--channel-fd", "6"]);
    }
    if adopt.is_some() {
        cmd.args(["--adopt-fd", "7"]);
    }
    cmd.env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: dup2 is async-signal-safe; the sources are ≥ HIGH_FDS, so
    // they never collide with the targets.
    unsafe {
        cmd.pre_exec(move || {
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
    let child = cmd.spawn().map_err(|source| RunError::Spawn {
        path: jailer.to_path_buf(),
        source,
    })?;
    Ok(Launched { child, outcome })
}
