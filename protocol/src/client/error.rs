//! What a call on the supervisor socket can fail with.

use crate::frame::FrameError;
use crate::wire::{ErrorCode, ErrorReply, Reply};
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot connect to {path}: {source}")]
    Connect {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("handshake with the supervisor failed: {0}")]
    Handshake(String),
    /// The supervisor answered the request with an error.
    #[error("supervisor error ({:?}): {}", .0.code, .0.message)]
    Server(ErrorReply),
    #[error("the connection to the supervisor was lost")]
    Disconnected,
    #[error(transparent)]
    Frame(#[from] FrameError),
    #[error("unexpected reply from the supervisor: {0:?}")]
    UnexpectedReply(Box<Reply>),
    #[error("invalid use of the client: {0}")]
    Usage(&'static str),
}

impl ClientError {
    /// The supervisor's error code, if the supervisor answered with one.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Server(r) => Some(r.code),
            _ => None,
        }
    }

    /// The supervisor could not be reached, or the connection to it failed:
    /// the request may succeed on a new connection.
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            ClientError::Connect { .. } | ClientError::Disconnected | ClientError::Handshake(_)
        )
    }

    pub(super) fn unexpected(reply: Reply) -> ClientError {
        ClientError::UnexpectedReply(Box::new(reply))
    }
}
