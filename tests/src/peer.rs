//! Talking to a Unix socket as another user: a forked child becomes the
//! given uid and gid (no supplementary groups), connects, sends bytes and
//! reports every byte the server sent back and how the conversation ended.
//! The kernel's `SO_PEERCRED` then names that uid to the server, as it would
//! for any other process on the host.

use prims_protocol::frame::split_frame;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

/// How the child's reading ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The server closed the connection (EOF).
    Closed,
    /// The server reset it (ECONNRESET or EPIPE: it closed with our bytes unread).
    Reset,
    /// The wanted number of frames arrived; the connection was still open.
    Enough,
    /// Nothing more came within the timeout; the connection was still open.
    TimedOut,
}

#[derive(Debug)]
pub struct Talk {
    pub ended: Ended,
    /// Frame bodies the server sent, in order (headers stripped).
    pub frames: Vec<Vec<u8>>,
}

impl Talk {
    /// The server hung up without sending anything.
    pub fn refused(&self) -> bool {
        matches!(self.ended, Ended::Closed | Ended::Reset) && self.frames.is_empty()
    }
}

/// What went wrong in the child before the conversation, by exit code.
fn setup_failure(code: i32) -> &'static str {
    match code {
        10 => "becoming the uid/gid failed",
        11 => "connect failed (the socket file's mode refused this uid/gid?)",
        12 => "writing the request failed",
        _ => "the child failed",
    }
}

const BUF: usize = 256 * 1024;

/// As `uid`/`gid`, connect to `socket`, send `send`, and read until
/// `want_frames` whole frames arrived, the server hung up, or nothing came
/// for `timeout`. Runs in a forked child of this (threaded) process, which
/// makes only raw syscalls on memory prepared before the fork.
pub fn talk_as(
    uid: u32,
    gid: u32,
    socket: &Path,
    send: &[u8],
    want_frames: usize,
    timeout: Duration,
) -> Talk {
    // SAFETY: sockaddr_un is plain data; all-zero is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let raw = socket.as_os_str().as_bytes();
    assert!(raw.len() < addr.sun_path.len(), "socket path too long");
    for (d, s) in addr.sun_path.iter_mut().zip(raw) {
        *d = *s as libc::c_char;
    }
    let tv = libc::timeval {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_usec: timeout.subsec_micros() as libc::suseconds_t,
    };
    let mut buf = vec![0u8; BUF];
    let mut pipe = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two fds into the array, which outlives the call.
    let piped = unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(piped, 0);
    // SAFETY: the child makes only async-signal-safe syscalls on memory
    // that exists before the fork, then _exits; the parent only waits.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: we are the freshly forked child `child` requires; every
        // argument points at memory made before the fork.
        unsafe { child(uid, gid, &addr, &tv, send, want_frames, &mut buf, pipe[1]) }
    }
    // SAFETY: closing our copy of the write end; the read end is ours.
    unsafe { libc::close(pipe[1]) };
    let mut report = Vec::new();
    loop {
        // SAFETY: reading into a live buffer of the given length.
        let n = unsafe { libc::read(pipe[0], buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            break;
        }
        report.extend_from_slice(&buf[..n as usize]);
    }
    // SAFETY: the read end is ours and no longer used.
    unsafe { libc::close(pipe[0]) };
    let mut status = 0;
    // SAFETY: waiting for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status), "the child died: status {status}");
    let code = libc::WEXITSTATUS(status);
    assert_eq!(code, 0, "as uid {uid}: {}", setup_failure(code));
    let ended = match report.first() {
        Some(0) => Ended::Closed,
        Some(1) => Ended::Reset,
        Some(2) => Ended::Enough,
        Some(3) => Ended::TimedOut,
        other => panic!("the child reported {other:?}"),
    };
    Talk {
        ended,
        frames: split_frames(&report[1..]),
    }
}

/// The child's side. Reports one byte of [`Ended`] and then what it read.
///
/// # Safety
/// Only in a freshly forked child; never returns.
#[allow(clippy::too_many_arguments)]
unsafe fn child(
    uid: u32,
    gid: u32,
    addr: &libc::sockaddr_un,
    tv: &libc::timeval,
    send: &[u8],
    want_frames: usize,
    buf: &mut [u8],
    report: libc::c_int,
) -> ! {
    // SAFETY: alarm, the credential calls, socket, connect and setsockopt
    // are async-signal-safe syscalls; setgroups reads no list when its size
    // is 0, and `addr` and `tv` are live references of the types whose
    // sizes are passed. _exit never returns.
    let fd = unsafe {
        libc::alarm(120);
        let ok = libc::setgroups(0, std::ptr::null()) == 0
            && libc::setgid(gid) == 0
            && libc::setuid(uid) == 0
            && libc::getuid() == uid
            && libc::getgid() == gid;
        if !ok {
            libc::_exit(10);
        }
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
        if fd < 0 || libc::connect(fd, (addr as *const libc::sockaddr_un).cast(), len) != 0 {
            libc::_exit(11);
        }
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        );
        fd
    };
    // MSG_NOSIGNAL: a server that hung up already must not kill us with SIGPIPE.
    let mut sent = 0;
    let mut ended: u8 = 0;
    while sent < send.len() {
        // SAFETY: `send[sent..]` is a live slice of the length passed.
        let n = unsafe {
            libc::send(
                fd,
                send[sent..].as_ptr().cast(),
                send.len() - sent,
                libc::MSG_NOSIGNAL,
            )
        };
        if n <= 0 {
            // Refused before we finished talking: see what it said, if anything.
            ended = 1;
            break;
        }
        sent += n as usize;
    }
    let mut got = 0;
    if ended == 0 {
        ended = loop {
            if complete_frames(&buf[..got]) >= want_frames {
                break 2;
            }
            if got == buf.len() {
                break 2;
            }
            let rest = &mut buf[got..];
            // SAFETY: `rest` is a live, writable slice of the length passed.
            let n = unsafe { libc::read(fd, rest.as_mut_ptr().cast(), rest.len()) };
            if n == 0 {
                break 0;
            }
            if n < 0 {
                // SAFETY: __errno_location returns this thread's errno slot,
                // valid for the life of the thread.
                let e = unsafe { *libc::__errno_location() };
                break if e == libc::EAGAIN || e == libc::EWOULDBLOCK {
                    3
                } else {
                    1
                };
            }
            got += n as usize;
        };
    }
    // SAFETY: `ended` is one live byte.
    unsafe { libc::write(report, (&ended as *const u8).cast(), 1) };
    let mut off = 0;
    while off < got {
        let rest = &buf[off..got];
        // SAFETY: `rest` is a live slice of the length passed.
        let n = unsafe { libc::write(report, rest.as_ptr().cast(), rest.len()) };
        if n <= 0 {
            break;
        }
        off += n as usize;
    }
    // SAFETY: ends the child at once, running nothing of the parent's.
    unsafe { libc::_exit(0) }
}

/// How many whole frames `bytes` starts with. No allocation: the child uses it.
fn complete_frames(mut bytes: &[u8]) -> usize {
    let mut n = 0;
    while let Some((_, rest)) = split_frame(bytes) {
        bytes = rest;
        n += 1;
    }
    n
}

/// The bodies of the whole frames `bytes` starts with.
fn split_frames(mut bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    while let Some((body, rest)) = split_frame(bytes) {
        frames.push(body.to_vec());
        bytes = rest;
    }
    frames
}

/// Wait until the other end has read every byte written to `s` (its send
/// queue, `SIOCOUTQ`, is empty): from then on the server holds whatever
/// those bytes cost it.
pub async fn wait_until_peer_read_all(s: &tokio::net::UnixStream) {
    use std::os::fd::AsRawFd;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let mut queued: libc::c_int = 0;
        // SAFETY: TIOCOUTQ writes one int through a pointer to a live local.
        let rc = unsafe { libc::ioctl(s.as_raw_fd(), libc::TIOCOUTQ, &mut queued) };
        assert_eq!(rc, 0, "SIOCOUTQ: {}", std::io::Error::last_os_error());
        if queued == 0 {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the server left {queued} bytes unread for 60 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
