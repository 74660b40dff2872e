//! The listening socket a proxied jail's init sends out of the jail's
//! network namespace (SCM_RIGHTS), checked before anyone serves it.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The listening socket the jail's init sent (SCM_RIGHTS).
pub(crate) async fn receive_listener(channel: OwnedFd) -> std::io::Result<OwnedFd> {
    let stream = std::os::unix::net::UnixStream::from(channel);
    stream.set_nonblocking(true)?;
    let stream = tokio::net::UnixStream::from_std(stream)?;
    loop {
        stream.readable().await?;
        match stream.try_io(tokio::io::Interest::READABLE, || {
            recv_fd(stream.as_raw_fd())
        }) {
            Ok(fd) => return Ok(fd),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
}

fn recv_fd(sock: RawFd) -> std::io::Result<OwnedFd> {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
    let mut byte = [0u8; 1];
    let mut iov = [std::io::IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!([RawFd; 1]);
    let msg = recvmsg::<()>(
        sock,
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC | MsgFlags::MSG_DONTWAIT,
    )
    .map_err(std::io::Error::from)?;
    let mut got = None;
    for c in msg.cmsgs().map_err(std::io::Error::from)? {
        if let ControlMessageOwned::ScmRights(fds) = c {
            for fd in fds {
                // SAFETY: the kernel just installed this fd for us; we own it.
                let owned = unsafe { OwnedFd::from_raw_fd(fd) };
                if got.is_none() {
                    got = Some(owned);
                }
            }
        }
    }
    if msg.bytes == 0 && got.is_none() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the jail closed the proxy channel",
        ));
    }
    let fd = got.ok_or_else(|| std::io::Error::other("a message without a listener"))?;
    is_listening_tcp(&fd)?;
    Ok(fd)
}

/// The fd must be a listening TCP socket, whatever the jail's init sent.
fn is_listening_tcp(fd: &OwnedFd) -> std::io::Result<()> {
    use nix::sys::socket::{getsockopt, sockopt};
    let listening = getsockopt(fd, sockopt::AcceptConn).map_err(std::io::Error::from)?;
    let ty = getsockopt(fd, sockopt::SockType).map_err(std::io::Error::from)?;
    if !listening || ty != nix::sys::socket::SockType::Stream {
        return Err(std::io::Error::other(
            "the proxy channel carried something other than a listening TCP socket",
        ));
    }
    Ok(())
}
