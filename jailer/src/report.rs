//! Messages from the jail's init to the jailer, one JSON line each, over a
//! pipe that python never sees (it is close-on-exec).

use nix::errno::Errno;
use prims_protocol::jail::{Enforcement, SetupError};
use serde::{Deserialize, Serialize};
use std::os::fd::{AsRawFd, BorrowedFd};

#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub enum Report {
    Landlock { enforcement: Enforcement, abi: u32 },
    SetupFailed(SetupError),
    Exited(i32),
    Signaled(i32),
}

/// Write one report. Errors are ignored: the parent treats a missing report
/// as a lost child, which is the right outcome anyway.
pub fn send(fd: BorrowedFd<'_>, report: &Report) {
    let Ok(mut line) = serde_json::to_vec(report) else {
        return;
    };
    line.push(b'\n');
    let mut off = 0;
    while off < line.len() {
        // SAFETY: writing from a live buffer to an fd we hold.
        let n = unsafe {
            libc::write(
                fd.as_raw_fd(),
                line[off..].as_ptr().cast(),
                line.len() - off,
            )
        };
        if n < 0 {
            if Errno::last() == Errno::EINTR {
                continue;
            }
            return;
        }
        off += n as usize;
    }
}

/// Read every report until EOF.
pub fn read_all(fd: BorrowedFd<'_>) -> Vec<Report> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        // SAFETY: reading into a live stack buffer from an fd we hold.
        let n = unsafe { libc::read(fd.as_raw_fd(), chunk.as_mut_ptr().cast(), chunk.len()) };
        if n < 0 {
            if Errno::last() == Errno::EINTR {
                continue;
            }
            break;
        }
        if n == 0 || buf.len() > 1 << 20 {
            break;
        }
        buf.extend_from_slice(&chunk[..n as usize]);
    }
    buf.split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .filter_map(|l| serde_json::from_slice(l).ok())
        .collect()
}
