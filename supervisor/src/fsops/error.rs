//! What a workspace file operation can fail with, and the error code each
//! failure maps to on the socket.

use nix::errno::Errno;
use prims_protocol::wire::{ErrorCode, ErrorReply};

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
    #[error("{path:?}: a copy of more than the {max} inodes allowed; nothing was kept")]
    TooManyInodes { path: String, max: u64 },
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
            FsError::TooMany { .. }
            | FsError::NoSpace(_)
            | FsError::TooLarge { .. }
            | FsError::TooManyInodes { .. } => ErrorCode::Quota,
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
        let path = shorten(path);
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

/// A path as quoted in an error: at most 200 characters.
pub(super) fn shorten(raw: &str) -> String {
    if raw.len() <= 200 {
        return raw.to_string();
    }
    let mut end = 200;
    while !raw.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &raw[..end])
}
