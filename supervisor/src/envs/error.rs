//! Why an environment could not be had.

use prims_protocol::wire::{ErrorCode, ErrorReply};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Errors are `Clone` because one build's failure is handed to every caller
/// that waited for it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EnvError {
    #[error("requirement {requirement:?} {reason}")]
    BadRequirement { requirement: String, reason: String },
    #[error("{count} requirements were given; at most {max} are accepted")]
    TooManyRequirements { count: usize, max: usize },
    /// uv ran and failed; `message` is the tail of its own output.
    #[error("pip install failed: {message}")]
    Build { message: String },
    #[error(
        "pip install failed: the environment build timed out after {} (python.build_timeout)",
        prims_policy::HumanDuration(*after)
    )]
    Timeout { after: Duration },
    /// The build ran out of its memory limit.
    #[error("pip install failed: the environment build ran out of memory ({limit_bytes} bytes)")]
    OutOfMemory { limit_bytes: u64 },
    /// The disk cannot hold what a build reserves.
    #[error("not enough disk to build an environment: {what} needs {bytes} bytes; free disk space (or lower python.build_disk)")]
    Disk { what: &'static str, bytes: u64 },
    /// uv could not be found or installed.
    #[error("uv is not available: {message}")]
    Uv { message: String },
    /// The install jail could not be set up or run.
    #[error("environment build jail: {message}")]
    Jail { message: String },
    /// The caller stopped the install (its call's time ran out, or the
    /// call was cancelled) before it ended.
    #[error("the install was stopped before it ended")]
    Cancelled,
    /// The policy's `python` settings cannot be used.
    #[error("policy: {message}")]
    Policy { message: String },
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: Arc<io::Error>,
    },
}

impl EnvError {
    /// The wire code a client sees for this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            EnvError::BadRequirement { .. } | EnvError::TooManyRequirements { .. } => {
                ErrorCode::BadRequest
            }
            EnvError::Build { .. }
            | EnvError::Timeout { .. }
            | EnvError::OutOfMemory { .. }
            | EnvError::Uv { .. }
            | EnvError::Disk { .. } => ErrorCode::Environment,
            EnvError::Cancelled => ErrorCode::Cancelled,
            EnvError::Jail { .. } | EnvError::Policy { .. } | EnvError::Io { .. } => {
                ErrorCode::Internal
            }
        }
    }

    /// The error as a client sees it.
    pub fn to_reply(&self) -> ErrorReply {
        ErrorReply {
            code: self.code(),
            message: self.to_string(),
        }
    }

    /// Making `what` (a volume or an image) failed.
    pub(crate) fn volume(
        what: &'static str,
    ) -> impl FnOnce(crate::volume::VolumeError) -> EnvError {
        move |e| match e {
            crate::volume::VolumeError::NoSpace { size } => EnvError::Disk { what, bytes: size },
            e => EnvError::Build {
                message: format!("making {what}: {e}"),
            },
        }
    }

    pub(crate) fn io(what: &'static str, path: &Path) -> impl FnOnce(io::Error) -> EnvError {
        let path = path.to_path_buf();
        move |source| EnvError::Io {
            what,
            path,
            source: Arc::new(source),
        }
    }
}
