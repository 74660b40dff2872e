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
