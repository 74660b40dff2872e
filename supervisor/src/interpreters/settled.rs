//! Whether a cell's code has really finished. The agent's `done` travels
//! on a channel that the cell's own code can write as well (it runs in the
//! agent's process), so a `done` alone proves nothing: code could send one
//! and run on. The kernel's view decides: a cell is over once python's main
//! thread is blocked reading the agent's channel, where the agent waits
//! between cells. Code that blocks the main thread there itself has stopped
//! running, and whatever it left in other threads runs on as background
//! work, as a background process would.
//!
//! The agent sends `done` and then reads, so the main thread is seen there
//! microseconds after its `done` arrives. When it is not (a `done` came
//! while the code ran on), the check is repeated until it is, and then a
//! `sync` with a fresh nonce flushes the channel: the `done` the agent sent
//! before it blocked arrives before the answer, and the latest `done` wins.

use super::channel::{CellDone, ToAgent};
use super::output::new_marker;
use std::ffi::CStr;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::sync::OnceLock;
use std::time::Duration;
use tokio::time::Instant as TokioInstant;

/// The pauses between looks after a cell's first `done`, before it doubts
/// the `done`: the agent is seen in its read 40 to 80 µs after its `done`
/// arrives when it has a core, later when it waits for one. A pause gives
/// the core up (looking without pause took 40 looks a cell under load,
/// the CPU the agent needed to get there).
const SPIN_PAUSES_US: [u64; 6] = [20, 40, 80, 160, 320, 640];
/// The pause before the first look after that, doubled up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_micros(250);
const MAX_PAUSE: Duration = Duration::from_millis(5);
/// `done` frames one cell may send; code that sends more is not the agent.
pub(crate) const MAX_DONES: u32 = 64;
/// `/proc/<pid>/syscall`: a number and eight hex words.
const SYSCALL_LINE_MAX: usize = 256;

/// The confirmation of one cell's end, fed the cell's `done` frames.
#[derive(Debug, Default)]
pub(crate) struct Confirm {
    latest: Option<CellDone>,
    dones: u32,
    /// The main thread was seen elsewhere after the latest `done` came.
    doubted: bool,
    /// Looks since the spin gave up.
    pauses: u32,
    /// When to look again, while doubted.
    pub recheck: Option<TokioInstant>,
    /// The nonce of the `sync` sent, awaiting its answer.
    nonce: Option<String>,
}

/// What the caller does next.
#[derive(Debug)]
pub(crate) enum Step {
    Wait,
    /// The cell is over: this is how it ended.
    Ended(CellDone),
    /// Send this to the agent, then wait for its `synced`.
    Send(ToAgent),
    /// More `done` frames than the agent ever sends.
    TooMany,
}

impl Confirm {
    /// A `done` for the running cell arrived.
    pub(crate) async fn done(&mut self, main: &MainThread, d: CellDone) -> Step {
        self.latest = Some(d);
        self.dones += 1;
        if self.dones > MAX_DONES {
            return Step::TooMany;
        }
        if self.nonce.is_some() {
            // It was sent before the `sync` was read: the answer follows.
            return Step::Wait;
        }
        self.doubted = false;
        // Only the first pauses: a flood of forged ones costs a look each.
        let pauses = if self.dones == 1 {
            &SPIN_PAUSES_US[..]
        } else {
            &[]
        };
        for us in pauses {
            if let Some(step) = self.look(main) {
                return step;
            }
            pause(Duration::from_micros(*us)).await;
        }
        self.look(main).unwrap_or_else(|| self.doubt())
    }
    /// The time to look again came.
    pub(crate) fn again(&mut self, main: &MainThread) -> Step {
        self.look(main).unwrap_or_else(|| self.doubt())
    }

    /// The agent answered a `sync` with `nonce`: `None` when it is not the
    /// answer to ours (a forgery: the channel cannot be trusted).
    pub(crate) fn synced(&mut self, nonce: &str) -> Option<Step> {
        if self.nonce.as_deref() != Some(nonce) {
            return None;
        }
        Some(self.latest.take().map_or(Step::Wait, Step::Ended))
    }

    fn look(&mut self, main: &MainThread) -> Option<Step> {
        let settled = match main.awaits_cell() {
            Ok(b) => b,
            // python is gone; the end of its channel follows.
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => true,
            Err(e) => {
                tracing::warn!(error = %e, "cannot see python's main thread in /proc; taking the agent's done as the end of the cell");
                true
            }
        };
        if !settled {
            return None;
        }
        self.recheck = None;
        if !self.doubted {
            return self.latest.take().map(Step::Ended);
        }
        let nonce = new_marker();
        self.nonce = Some(nonce.clone());
        Some(Step::Send(ToAgent::Sync { nonce }))
    }

    fn doubt(&mut self) -> Step {
        self.doubted = true;
        let pause = (FIRST_PAUSE * (1 << self.pauses.min(5))).min(MAX_PAUSE);
        self.pauses += 1;
        self.recheck = Some(TokioInstant::now() + pause);
        Step::Wait
    }
}

/// python's main thread, seen through its `/proc` directory.
#[derive(Debug)]
pub(crate) struct MainThread {
    proc_dir: OwnedFd,
    /// Its `syscall`, opened at the first look and read again from the
    /// start at each (a path walk in /proc costs more than the read).
    syscall: OnceLock<File>,
    /// `socket:[inode]`, as `/proc/<pid>/fd/<n>` shows the agent's end of
    /// the channel.
    channel: String,
}

impl MainThread {
    /// `proc_dir` is python's `/proc/<pid>`; `channel_ino` the inode of the
    /// socket the agent got as its channel.
    pub(crate) fn new(proc_dir: OwnedFd, channel_ino: u64) -> MainThread {
        MainThread {
            proc_dir,
            syscall: OnceLock::new(),
            channel: format!("socket:[{channel_ino}]"),
        }
    }

    /// True when the main thread waits in read(2) on the agent's channel.
    pub(crate) fn awaits_cell(&self) -> io::Result<bool> {
        let syscall = match self.syscall.get() {
            Some(f) => f,
            None => {
                let f = open_at(self.proc_dir.as_fd(), c"syscall")?;
                self.syscall.get_or_init(|| f)
            }
        };
        let mut buf = [0u8; SYSCALL_LINE_MAX];
        let n = syscall.read_at(&mut buf, 0)?;
        let text = std::str::from_utf8(&buf[..n]).unwrap_or_default();
        let Some((nr, fd)) = blocked_in(text) else {
            return Ok(false);
        };
        if nr != libc::SYS_read || fd > i32::MAX as u64 {
            return Ok(false);
        }
        let link = format!("fd/{fd}");
        match readlink_at(self.proc_dir.as_fd(), &link) {
            Ok(target) => Ok(target == self.channel),
            // Closed since: not the channel.
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// The syscall number and first argument of a thread blocked in a
/// syscall, from `/proc/<pid>/syscall`: `None` when it is running
/// (`running`) or blocked outside one (`-1 sp pc`).
fn blocked_in(text: &str) -> Option<(i64, u64)> {
    let mut fields = text.split_ascii_whitespace();
    let nr: i64 = fields.next()?.parse().ok()?;
    if nr < 0 {
        return None;
    }
    let arg = fields.next()?.strip_prefix("0x")?;
    Some((nr, u64::from_str_radix(arg, 16).ok()?))
}

fn open_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<File> {
    // SAFETY: openat with a live directory fd and a NUL-terminated name.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: openat returned a new fd that nothing else owns.
    Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// Waits `d` with a timer finer than tokio's millisecond wheel; yields once
/// where no timerfd can be had.
async fn pause(d: Duration) {
    use nix::sys::time::TimeSpec;
    use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
    let timer = TimerFd::new(
        ClockId::CLOCK_MONOTONIC,
        TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC,
    )
    .and_then(|t| {
        t.set(
            Expiration::OneShot(TimeSpec::from_duration(d)),
            TimerSetTimeFlags::empty(),
        )?;
        Ok(t)
    });
    // SAFETY: the AsyncFd owns the timer's fd for its whole life, and an
    // OwnedFd always returns the same, open descriptor.
    match timer.map(|t| unsafe { tokio::io::unix::AsyncFd::register(OwnedFd::from(t)) }) {
        Ok(Ok(fd)) => {
            let _ = fd.readable().await;
        }
        _ => tokio::task::yield_now().await,
    }
}

fn readlink_at(dir: BorrowedFd<'_>, name: &str) -> io::Result<String> {
    let target = nix::fcntl::readlinkat(dir, name).map_err(io::Error::from)?;
    Ok(target.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_blocked_in_a_syscall_shows_its_number_and_first_argument() {
        let read = "0 0x3e8 0x7ffc4a1b2c30 0x4 0x0 0x0 0x0 0x7ffc4a1b2bf8 0x7f2b3c4d5e6f\n";
        assert_eq!(blocked_in(read), Some((0, 1000)));
        assert_eq!(blocked_in("running\n"), None);
        assert_eq!(blocked_in("-1 0x7ffc4a1b2bf8 0x7f2b3c4d5e6f\n"), None);
        for junk in ["", "0", "0 3e8", "x 0x3", "0 0xzz"] {
            assert_eq!(blocked_in(junk), None, "{junk:?}");
        }
    }

    #[test]
    fn a_process_blocked_reading_the_channel_is_seen_there() {
        use std::os::unix::fs::MetadataExt;
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let ino = std::fs::File::from(theirs.as_fd().try_clone_to_owned().unwrap())
            .metadata()
            .unwrap()
            .ino();
        let fd = theirs.as_raw_fd();
        // SAFETY: fcntl on a live fd: the child inherits it across exec.
        assert_eq!(unsafe { libc::fcntl(fd, libc::F_SETFD, 0) }, 0);
        let mut child = std::process::Command::new("/usr/bin/python3")
            .args(["-c", &format!("import os; os.read({fd}, 1)")])
            .spawn()
            .unwrap();
        drop(theirs);
        let dir = || OwnedFd::from(std::fs::File::open(format!("/proc/{}", child.id())).unwrap());
        let main = MainThread::new(dir(), ino);
        let other = MainThread::new(dir(), ino + 1);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !main.awaits_cell().unwrap() {
            assert!(std::time::Instant::now() < deadline, "never seen blocked");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(
            !other.awaits_cell().unwrap(),
            "another socket is not the channel"
        );
        drop(ours);
        child.wait().unwrap();
        assert!(main.awaits_cell().is_err(), "a process gone is an error");
    }
}
