//! The error replies the daemon's phases answer with most.

use prims_protocol::wire::{ErrorCode, ErrorReply};

pub(super) fn bad_request(message: impl Into<String>) -> ErrorReply {
    ErrorReply {
        code: ErrorCode::BadRequest,
        message: message.into(),
    }
}

pub(super) fn internal(message: impl std::fmt::Display) -> ErrorReply {
    ErrorReply {
        code: ErrorCode::Internal,
        message: message.to_string(),
    }
}

/// A request that came, or was still waiting to start, when the server
/// began to stop.
pub(super) fn stopping() -> ErrorReply {
    ErrorReply {
        code: ErrorCode::Stopping,
        message: "the server is stopping, and this call was not started; the session, its files \
                  and its variables are there again after the server's next start"
            .into(),
    }
}
