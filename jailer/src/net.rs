//! The jail's network: an empty namespace, with `lo` up in loopback and
//! proxy modes (every run of user code), so code serves and connects on
//! the jail's own loopback and reaches nothing else. In proxy mode the
//! init also opens the only way out: a TCP listener on the jail's own
//! loopback, handed to the caller, whose proxy serves it from outside the
//! jail.

use crate::error::JailError;
use nix::errno::Errno;
use nix::sys::socket::{
    bind, listen, sendmsg, socket, AddressFamily, Backlog, ControlMessage, MsgFlags, SockFlag,
    SockType, SockaddrIn,
};
use prims_protocol::jail::{JobSpec, NetworkMode};
use std::io::IoSlice;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

/// The network `spec` asks for, in this (the jail's) namespace; in proxy
/// mode the listener goes out on `proxy`.
pub fn bring_up(spec: &JobSpec, proxy: Option<&OwnedFd>) -> Result<(), JailError> {
    match spec.network {
        NetworkMode::None => Ok(()),
        NetworkMode::Loopback => loopback_up(),
        NetworkMode::Proxy => {
            loopback_up()?;
            let channel = proxy.ok_or(JailError::Spec(
                "network mode proxy needs a proxy channel (--proxy-fd)".into(),
            ))?;
            hand_over_listener(spec.proxy_port, channel)
        }
    }
}

fn loopback_up() -> Result<(), JailError> {
    // SAFETY: creating a socket has no memory-safety preconditions.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(JailError::LoopbackUp(Errno::last()));
    }
    // SAFETY: raw is a fresh socket fd owned by nobody else.
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: ifreq is plain data; zeroed is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS reads into the ifreq we own.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) } < 0 {
        return Err(JailError::LoopbackUp(Errno::last()));
    }
    // SAFETY: the flags member of the union was just filled in by the kernel.
    unsafe {
        req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    }
    // SAFETY: SIOCSIFFLAGS reads the ifreq we own.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) } < 0 {
        return Err(JailError::LoopbackUp(Errno::last()));
    }
    Ok(())
}

/// Listens on `127.0.0.1:port` in this (the jail's) network namespace and
/// sends the listening socket over `channel` (SCM_RIGHTS). The init keeps
/// no copy: jailed code can connect to the port, never accept on it.
fn hand_over_listener(port: u16, channel: &OwnedFd) -> Result<(), JailError> {
    let fail = |what, errno| JailError::ProxyListener { port, what, errno };
    let sock = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(|e| fail("socket", e))?;
    bind(sock.as_raw_fd(), &SockaddrIn::new(127, 0, 0, 1, port)).map_err(|e| fail("bind", e))?;
    listen(&sock, Backlog::new(64).unwrap_or(Backlog::MAXCONN)).map_err(|e| fail("listen", e))?;
    let fds = [sock.as_fd().as_raw_fd()];
    let iov = [IoSlice::new(b"L")];
    sendmsg::<()>(
        channel.as_raw_fd(),
        &iov,
        &[ControlMessage::ScmRights(&fds)],
        MsgFlags::MSG_NOSIGNAL,
        None,
    )
    .map_err(|e| fail("sending it to the supervisor", e))?;
    Ok(())
}
