//! Starting one prims-jailer process with its fds in place: the spec on
//! fd 3, the outcome memfd on fd 4, in proxy mode the proxy socket on fd 5,
//! a live interpreter's channel on fd 6, and a fork template's child's
//! socket on fd 7. python's stdout and stderr are
//! the jailer's, piped to us. Its argv[0] is the bare program name: the
//! jail sees the init's command line.

use super::error::RunError;
use prims_protocol::jail::JobSpec;
use std::ffi::CString;
use std::fs::File;
use std::io::{self, Seek, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;

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
    pub child: JailerProcess,
    pub outcome: File,
}

/// A jailer process this one started and has not reaped.
#[derive(Debug)]
pub(crate) struct JailerProcess {
    pid: libc::pid_t,
    /// Read ends of its stdout and stderr pipes, once each.
    pub stdout: Option<File>,
    pub stderr: Option<File>,
}

impl JailerProcess {
    pub fn id(&self) -> u32 {
        self.pid.unsigned_abs()
    }

    /// Blocks until it exits, and reaps it.
    pub fn wait(&mut self) -> io::Result<ExitStatus> {
        let mut status = 0;
        loop {
            // SAFETY: waitpid on our own unreaped child, into a local.
            let r = unsafe { libc::waitpid(self.pid, &mut status, 0) };
            if r == self.pid {
                return Ok(ExitStatus::from_raw(status));
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

/// `fd` duplicated to [`HIGH_FDS`] or above, close-on-exec, clear of the
/// child's dup2 targets; `err` names what it was for.
fn high_fd(fd: RawFd, err: fn(io::Error) -> RunError) -> Result<File, RunError> {
    dup_high(fd).map(File::from).map_err(err)
}

fn dup_high(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: fcntl on a valid fd; the duplicate is owned by the OwnedFd.
    let high = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, HIGH_FDS) };
    if high < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: high is a fresh fd nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(high) })
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
///
/// With `posix_spawn`, which clones with `CLONE_VM|CLONE_VFORK`: a fork
/// would copy this large, many-threaded process's page tables for every
/// jail, only to throw them away at the exec.
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
    let spawn_err = |source: io::Error| RunError::Spawn {
        path: jailer.to_path_buf(),
        source,
    };
    let null = std::fs::File::open("/dev/null")
        .and_then(|f| dup_high(f.as_raw_fd()))
        .map_err(spawn_err)?;
    let (out_r, out_w) = pipe().map_err(spawn_err)?;
    let (err_r, err_w) = pipe().map_err(spawn_err)?;
    let pairs = [
        (Some(null.as_raw_fd()), 0),
        (Some(out_w.as_raw_fd()), 1),
        (Some(err_w.as_raw_fd()), 2),
        (Some(spec_file.as_raw_fd()), SPEC_FD),
        (Some(outcome.as_raw_fd()), OUTCOME_FD),
        (proxy.as_ref().map(AsRawFd::as_raw_fd), PROXY_FD),
        (channel.as_ref().map(AsRawFd::as_raw_fd), CHANNEL_FD),
        (adopt.as_ref().map(AsRawFd::as_raw_fd), ADOPT_FD),
    ];
    // The jail's init is this process after its clone, and its command line
    // is /proc/1/cmdline to the jailed code: the bare name and fd numbers
    // say nothing of the host (the spec travels on SPEC_FD).
    let mut args = vec![JAILER_ARG0, "--spec-fd", "3", "--outcome-fd", "4"];
    if proxy.is_some() {
        args.extend(["--proxy-fd", "5"]);
    }
    if channel.is_some() {
        args.extend(["--channel-fd", "6"]);
    }
    if adopt.is_some() {
        args.extend(["--adopt-fd", "7"]);
    }
    let pid = spawn(jailer, &args, &pairs).map_err(spawn_err)?;
    drop((out_w, err_w));
    Ok(Launched {
        child: JailerProcess {
            pid,
            stdout: Some(File::from(out_r)),
            stderr: Some(File::from(err_r)),
        },
        outcome,
    })
}

/// A pipe, both ends clear of the dup2 targets.
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    Ok((dup_high(r.as_raw_fd())?, dup_high(w.as_raw_fd())?))
}

/// `posix_spawn` of `program` with `args` (argv[0] first), an empty
/// environment, and each `(source, target)` of `pairs` dup2ed in place; the
/// sources are close-on-exec and at [`HIGH_FDS`] or above.
fn spawn(
    program: &Path,
    args: &[&str],
    pairs: &[(Option<RawFd>, RawFd)],
) -> io::Result<libc::pid_t> {
    use nix::spawn::{PosixSpawnAttr, PosixSpawnFileActions, PosixSpawnFlags};
    use nix::sys::signal::{SigSet, Signal};
    let argv: Vec<CString> = args
        .iter()
        .map(|a| CString::new(*a))
        .collect::<Result<_, _>>()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let mut actions = PosixSpawnFileActions::init()?;
    for (src, dst) in pairs {
        if let Some(src) = src {
            actions.add_dup2(*src, *dst)?;
        }
    }
    // As std's Command: no signal blocked, and SIGPIPE (which the Rust
    // runtime ignores) back to its default.
    let mut attr = PosixSpawnAttr::init()?;
    attr.set_sigmask(&SigSet::empty())?;
    attr.set_sigdefault(&SigSet::from(Signal::SIGPIPE))?;
    // A session (and process group) of its own: a signal to the server's
    // group, a terminal's Ctrl-C among them, never reaches a jail.
    let setsid = PosixSpawnFlags::from_bits_retain(libc::POSIX_SPAWN_SETSID.into());
    attr.set_flags(
        PosixSpawnFlags::POSIX_SPAWN_SETSIGMASK | PosixSpawnFlags::POSIX_SPAWN_SETSIGDEF | setsid,
    )?;
    let no_env: [&std::ffi::CStr; 0] = [];
    let pid = nix::spawn::posix_spawn(program, &actions, &attr, &argv, &no_env)?;
    Ok(pid.as_raw())
}
