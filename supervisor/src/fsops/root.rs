//! The one way into a workspace: its root directory as an `O_PATH` fd,
//! which every operation resolves the caller's path beneath.

use super::error::FsError;
use nix::errno::Errno;
use std::os::fd::OwnedFd;
use std::path::Path;

/// The workspace root as an O_PATH fd. `root` comes from the session store,
/// not from a caller; O_NOFOLLOW still refuses a root that is a symlink.
pub(crate) fn open_root(root: &Path) -> Result<OwnedFd, FsError> {
    let c = std::ffi::CString::new(root.as_os_str().as_encoded_bytes()).map_err(|_| {
        FsError::BadPath {
            path: root.display().to_string(),
            reason: "contains a NUL byte",
        }
    })?;
    let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
    let fd = unsafe { libc::open(c.as_ptr(), flags) };
    if fd < 0 {
        return Err(match Errno::last() {
            Errno::ENOENT => FsError::NotFound("the workspace".to_string()),
            errno => FsError::Io {
                op: "opening the workspace",
                path: ".".to_string(),
                errno,
            },
        });
    }
    // SAFETY: a successful open returns a new fd owned by nobody else.
    Ok(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) })
}
