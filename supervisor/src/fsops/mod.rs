//! Workspace file operations that never follow a planted symlink out.
//!
//! Every operation opens the workspace root as an `O_PATH` fd and resolves
//! the caller's path relative to it with `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)`; nothing joins strings into a
//! host path. Reads follow symlinks only while they stay inside the workspace
//! (an absolute or escaping link fails with EXDEV, reported as Forbidden).
//! Writes and the output walk follow no symlink at all. All functions are
//! blocking: call them from `spawn_blocking`.

mod dir;
mod mount;
mod path;
mod read;
mod snapshot;
mod sys;
mod usage;

pub use dir::{list_dir, MAX_DIR_ENTRIES};
pub use mount::{write_mount, write_mount_up_to};
pub use read::read_file;
pub use snapshot::{diff, snapshot_output, Snapshot};
pub use usage::disk_used;
pub(crate) use usage::is_mount_point;

use nix::errno::Errno;
use prims_protocol::wire::{ErrorCode, ErrorReply};
use std::os::fd::OwnedFd;
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum FsError {
    #[error("path {path:?} {reason}")]
    BadPath { path: String, reason: &'static str },
    #[error("path {path:?} is refused: {reason}")]
    Escape { path: String, reason: &'static str },
    #[error("{0:?} does not exist")]
    NotFound(String),
    #[error("{0:?} is not a directory")]
    NotADirectory(String),
    #[error("{0:?} is not a regular file")]
    NotAFile(String),
    #[error("{path:?} has more than {max} entries")]
    TooMany { path: String, max: usize },
    #[error("{path:?}: {got} bytes arrived but {expected} were announced; nothing was written")]
    SizeMismatch {
        path: String,
        expected: u64,
        got: u64,
    },
    #[error("{path:?}: more than the {max} bytes allowed arrived; nothing was written")]
    TooLarge { path: String, max: u64 },
    #[error(
        "{path:?}: the upload stopped after {got} bytes without being ended; nothing was written"
    )]
    Incomplete { path: String, got: u64 },
    #[error("the workspace's disk quota is full (writing {0:?})")]
    NoSpace(String),
    #[error("{op} {path:?}: {errno}")]
    Io {
        op: &'static str,
        path: String,
        errno: Errno,
    },
}

impl FsError {
    pub fn code(&self) -> ErrorCode {
        match self {
            FsError::BadPath { .. }
            | FsError::NotADirectory(_)
            | FsError::NotAFile(_)
            | FsError::SizeMismatch { .. } => ErrorCode::BadRequest,
            FsError::Escape { .. } => ErrorCode::Forbidden,
            FsError::NotFound(_) => ErrorCode::NotFound,
            FsError::TooMany { .. } | FsError::NoSpace(_) | FsError::TooLarge { .. } => {
                ErrorCode::Quota
            }
            FsError::Incomplete { .. } => ErrorCode::Cancelled,
            FsError::Io { .. } => ErrorCode::Internal,
        }
    }

    pub fn to_reply(&self) -> ErrorReply {
        ErrorReply {
            code: self.code(),
            message: self.to_string(),
        }
    }

    /// The error for `errno` from an operation `op` on the workspace path
    /// `path` (as the caller named it).
    pub(crate) fn from_errno(op: &'static str, path: &str, errno: Errno) -> FsError {
        let path = path::shorten(path);
        match errno {
            Errno::EXDEV => FsError::Escape {
                path,
                reason: "it leads outside the workspace",
            },
            Errno::ELOOP => FsError::Escape {
                path,
                reason: "it goes through a symlink that is not allowed here, or a symlink loop",
            },
            Errno::ENOENT => FsError::NotFound(path),
            Errno::ENOTDIR => FsError::NotADirectory(path),
            Errno::EISDIR => FsError::NotAFile(path),
            Errno::ENAMETOOLONG => FsError::BadPath {
                path,
                reason: "has a component longer than 255 bytes",
            },
            Errno::ENOSPC | Errno::EDQUOT | Errno::EFBIG => FsError::NoSpace(path),
            errno => FsError::Io { op, path, errno },
        }
    }
}

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
