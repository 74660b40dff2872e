//! What can go wrong with a session, and how each maps onto the wire.

use prims_protocol::wire::{ErrorCode, ErrorReply};

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("{0:?} is not a session id (32 lowercase hex characters)")]
    BadId(String),
    /// Also what another tenant's session looks like.
    #[error("no such session (it was closed, or expired after being idle)")]
    NotFound,
    #[error("the tenant name is not acceptable: {0}")]
    BadTenant(&'static str),
    #[error("there are already {0} sessions, the most sessions.max_sessions allows; close one, or wait for idle ones to expire")]
    TooMany(usize),
    #[error(
        "no free host uid for another session (identity.uid_count allows {0} sessions at once)"
    )]
    NoUid(u32),
    #[error("not enough disk for a new session: its workspace reserves {quota} bytes (sessions.disk_quota) and {keep} bytes must stay free (sessions.min_free_disk), but only {free} bytes are free; close sessions or free disk space")]
    NoDisk { quota: u64, keep: u64, free: u64 },
    #[error("the session's workspace is not usable: {0}")]
    Workspace(String),
    #[error("the session's history cannot be read: {0}")]
    History(String),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

impl SessionError {
    pub fn code(&self) -> ErrorCode {
        match self {
            SessionError::BadId(_) | SessionError::BadTenant(_) => ErrorCode::BadRequest,
            SessionError::NotFound => ErrorCode::NotFound,
            SessionError::TooMany(_) | SessionError::NoUid(_) | SessionError::NoDisk { .. } => {
                ErrorCode::Busy
            }
            SessionError::Workspace(_) | SessionError::History(_) | SessionError::Io { .. } => {
                ErrorCode::Internal
            }
        }
    }

    pub fn to_reply(&self) -> ErrorReply {
        ErrorReply {
            code: self.code(),
            message: self.to_string(),
        }
    }

    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> SessionError {
        let what = what.into();
        move |source| SessionError::Io { what, source }
    }
}
