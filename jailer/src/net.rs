//! The jail's network: an empty namespace, with `lo` up in loopback mode.

use crate::error::JailError;
use nix::errno::Errno;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

pub fn loopback_up() -> Result<(), JailError> {
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
