//! The supervisor's channel to the egress proxy process: a `SOCK_SEQPACKET`
//! socket pair carrying one JSON message per packet, a jail's listening
//! socket riding along with `Attach` (SCM_RIGHTS). The supervisor is the
//! proxy's only source of rules: nothing a jail can write reaches them.

use crate::secrets::{Placement, SecretText, SecretValue};
use prims_policy::network::{AllowList, HostPattern};
use prims_protocol::egress::NetworkReport;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use tokio::io::unix::AsyncFd;

/// The largest message either side sends.
pub const MAX_MESSAGE: usize = 256 * 1024;

/// What the supervisor tells the proxy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ToProxy {
    /// Serve the listening socket that comes with this message as jail
    /// `jail`; it refuses every connection until a run begins.
    Attach { jail: u64 },
    /// What inspecting TLS needs, and every secret's value: sent first,
    /// and again at each reload of the policy (a rotation takes effect
    /// for the next request of every run).
    Configure {
        /// The server's CA (the key comes only this way).
        ca_cert: String,
        ca_key: SecretText,
        /// PEM texts of `network.upstream_ca`.
        upstream_ca: Vec<String>,
        secrets: Vec<SecretValue>,
    },
    /// Run `run` of the jail starts: new connections get these rules and
    /// budgets and are recorded for it.
    Begin {
        jail: u64,
        run: u64,
        list: AllowList,
        trust_named_addresses: bool,
        max_bytes: u64,
        max_connections: u64,
        /// Tunnels are inspected (but to `passthrough` hosts).
        inspect: bool,
        passthrough: Vec<HostPattern>,
        placements: Vec<Placement>,
    },
    /// Run `run` is over: answer with its [`FromProxy::Report`]; new
    /// connections are refused until the next run.
    End { jail: u64, run: u64 },
    /// The jail is gone: stop serving it and drop its connections.
    Detach { jail: u64 },
    /// Answer with [`FromProxy::Pong`]: the supervisor's watchdog.
    Ping { seq: u64 },
}

/// What the proxy tells the supervisor about a [`ToProxy::Configure`]:
/// sent only when it could not be used.
pub const CONFIGURE_FAILED: u64 = 0;

/// What the proxy tells the supervisor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum FromProxy {
    /// The run is in force: connections from now on are its.
    Begun {
        jail: u64,
        run: u64,
    },
    Report {
        jail: u64,
        run: u64,
        report: NetworkReport,
    },
    /// A `Configure` the proxy could not use (jail 0), or an `Attach`
    /// it could not serve.
    Refused {
        jail: u64,
        why: String,
    },
    Pong {
        seq: u64,
    },
}

/// One end of the channel.
#[derive(Debug)]
pub struct Channel {
    fd: AsyncFd<OwnedFd>,
}

/// A connected pair: the first end for this process, the second (blocking,
/// close-on-exec) to hand to the other.
pub fn pair() -> io::Result<(OwnedFd, OwnedFd)> {
    use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
    socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(io::Error::from)
}

impl Channel {
    /// Takes `fd` (one end of [`pair`]); needs a tokio runtime.
    pub fn new(fd: OwnedFd) -> io::Result<Channel> {
        set_nonblocking(fd.as_raw_fd())?;
        // SAFETY: the AsyncFd owns `fd` for its whole life, and an OwnedFd
        // always returns the same, open descriptor.
        let fd = unsafe { AsyncFd::register(fd) }?;
        Ok(Channel { fd })
    }

    /// Sends `msg`, with `fd` riding along when given.
    pub async fn send(&self, msg: &impl Serialize, fd: Option<BorrowedFd<'_>>) -> io::Result<()> {
        let bytes = serde_json::to_vec(msg).map_err(io::Error::other)?;
        if bytes.len() > MAX_MESSAGE {
            return Err(io::Error::other(format!(
                "a control message of {} bytes (at most {MAX_MESSAGE})",
                bytes.len()
            )));
        }
        loop {
            let mut guard = self.fd.writable().await?;
            match guard.try_io(|s| send_packet(s.get_ref().as_raw_fd(), &bytes, fd)) {
                Ok(r) => return r,
                Err(_would_block) => continue,
            }
        }
    }

    /// The next message and the fd that came with it; `None` once the
    /// other end is gone.
    pub async fn recv<T: DeserializeOwned>(&self) -> io::Result<Option<(T, Option<OwnedFd>)>> {
        let mut buf = vec![0u8; MAX_MESSAGE];
        let (n, fd) = loop {
            let mut guard = self.fd.readable().await?;
            match guard.try_io(|s| recv_packet(s.get_ref().as_raw_fd(), &mut buf)) {
                Ok(r) => break r?,
                Err(_would_block) => continue,
            }
        };
        if n == 0 {
            return Ok(None);
        }
        let msg = serde_json::from_slice(&buf[..n])
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        Ok(Some((msg, fd)))
    }
}

fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    // SAFETY: the caller owns `fd` for the duration of this call.
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    let flags = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL).map_err(io::Error::from)?);
    fcntl(fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK)).map_err(io::Error::from)?;
    Ok(())
}

fn send_packet(sock: RawFd, bytes: &[u8], fd: Option<BorrowedFd<'_>>) -> io::Result<()> {
    use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags};
    let iov = [io::IoSlice::new(bytes)];
    let fds = fd.map(|f| [f.as_raw_fd()]);
    let cmsgs: Vec<ControlMessage<'_>> = fds
        .as_ref()
        .map(|f| ControlMessage::ScmRights(f))
        .into_iter()
        .collect();
    sendmsg::<()>(sock, &iov, &cmsgs, MsgFlags::MSG_NOSIGNAL, None).map_err(io::Error::from)?;
    Ok(())
}

fn recv_packet(sock: RawFd, buf: &mut [u8]) -> io::Result<(usize, Option<OwnedFd>)> {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
    let mut iov = [io::IoSliceMut::new(buf)];
    let mut space = nix::cmsg_space!([RawFd; 1]);
    let msg = recvmsg::<()>(sock, &mut iov, Some(&mut space), MsgFlags::MSG_CMSG_CLOEXEC)
        .map_err(io::Error::from)?;
    if msg.flags.contains(MsgFlags::MSG_TRUNC) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a control message was too large",
        ));
    }
    let mut got = None;
    for c in msg.cmsgs().map_err(io::Error::from)? {
        if let ControlMessageOwned::ScmRights(fds) = c {
            for fd in fds {
                // SAFETY: the kernel just installed this fd for us; we own it.
                let owned = unsafe { OwnedFd::from_raw_fd(fd) };
                got.get_or_insert(owned);
            }
        }
    }
    Ok((msg.bytes, got))
}
