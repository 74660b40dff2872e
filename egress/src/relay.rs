//! Moving a connection's bytes between the jail and the upstream with
//! splice(2): socket to pipe to socket, inside the kernel, so the proxy
//! never copies a payload byte through its own memory. Each chunk is
//! counted against the run's budget before it goes on.

use crate::run::Run;
use nix::fcntl::{OFlag, SpliceFFlags};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use tokio::io::Interest;
use tokio::net::TcpStream;

/// What one splice may take from a socket: a default pipe's worth. Bigger
/// pipes measured no faster, and each costs pinned memory per connection.
const CHUNK: usize = 64 * 1024;

/// Why a direction stopped before its end of file.
pub enum Stop {
    /// The run's byte budget ran out.
    Cut,
    /// A socket or the pipe failed: the peer went away, most often.
    Broken,
    /// A plain-HTTP request carried the placeholder of this secret.
    Placeholder(String),
}

struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
}

impl Pipe {
    fn new() -> io::Result<Pipe> {
        let (read, write) = nix::unistd::pipe2(OFlag::O_NONBLOCK | OFlag::O_CLOEXEC)?;
        Ok(Pipe { read, write })
    }
}

fn splice(from: impl AsFd, to: impl AsFd, len: usize) -> io::Result<usize> {
    let flags = SpliceFFlags::SPLICE_F_MOVE | SpliceFFlags::SPLICE_F_NONBLOCK;
    nix::fcntl::splice(from, None, to, None, len, flags).map_err(io::Error::from)
}

/// `from` to `to` until `from`'s end of file, which is passed on as a
/// shutdown of `to`'s writing side.
pub async fn pump(
    from: &TcpStream,
    to: &TcpStream,
    run: &Run,
    host: &str,
    port: u16,
) -> Result<(), Stop> {
    let pipe = Pipe::new().map_err(|e| {
        tracing::warn!(host, port, error = %e, "egress: no pipe for a connection");
        Stop::Broken
    })?;
    loop {
        let n = loop {
            from.readable().await.map_err(|_| Stop::Broken)?;
            match from.try_io(Interest::READABLE, || splice(from, &pipe.write, CHUNK)) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(_) => return Err(Stop::Broken),
            }
        };
        if n == 0 {
            pass_on_eof(to);
            return Ok(());
        }
        if !run.take_bytes(n) {
            return Err(Stop::Cut);
        }
        run.log.moved(host, port, n as u64);
        let mut left = n;
        while left > 0 {
            to.writable().await.map_err(|_| Stop::Broken)?;
            match to.try_io(Interest::WRITABLE, || splice(&pipe.read, to, left)) {
                Ok(0) => return Err(Stop::Broken),
                Ok(m) => left -= m,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(_) => return Err(Stop::Broken),
            }
        }
    }
}

/// [`pump`] through the proxy's memory, for a plain-HTTP request's body
/// when the run has secrets: the bytes are searched for placeholders,
/// which never go out unencrypted.
pub async fn pump_watching(
    from: &TcpStream,
    to: &TcpStream,
    run: &Run,
    (host, port): (&str, u16),
    scanner: &mut crate::secrets::stream::Scanner,
) -> Result<(), Stop> {
    let mut buf = vec![0u8; CHUNK];
    loop {
        from.readable().await.map_err(|_| Stop::Broken)?;
        let n = match from.try_read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(_) => return Err(Stop::Broken),
        };
        if n == 0 {
            pass_on_eof(to);
            return Ok(());
        }
        if let Some(name) = scanner.feed(&buf[..n]) {
            return Err(Stop::Placeholder(name.to_string()));
        }
        if !run.take_bytes(n) {
            return Err(Stop::Cut);
        }
        run.log.moved(host, port, n as u64);
        let mut sent = 0;
        while sent < n {
            to.writable().await.map_err(|_| Stop::Broken)?;
            match to.try_write(&buf[sent..n]) {
                Ok(0) => return Err(Stop::Broken),
                Ok(m) => sent += m,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(_) => return Err(Stop::Broken),
            }
        }
    }
}

/// `from`'s end of file, passed on as a shutdown of `to`'s writing side.
fn pass_on_eof(to: &TcpStream) {
    let _ = nix::sys::socket::shutdown(
        std::os::fd::AsRawFd::as_raw_fd(to),
        nix::sys::socket::Shutdown::Write,
    );
}
