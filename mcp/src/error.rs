//! The error every tool reports: a message for the model, returned as an
//! `isError` tool result rather than a protocol error.

use prims_protocol::client::ClientError;
use prims_protocol::wire::ErrorCode;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct ToolError(pub String);

impl ToolError {
    pub(crate) fn new(message: impl Into<String>) -> ToolError {
        ToolError(message.into())
    }
}

impl From<ClientError> for ToolError {
    fn from(e: ClientError) -> ToolError {
        ToolError(describe(&e))
    }
}

/// A sentence a model (or a person) can act on.
fn describe(e: &ClientError) -> String {
    match e {
        ClientError::Server(r) => match r.code {
            ErrorCode::Busy => format!(
                "The sandbox is busy ({}). Retry in a few seconds.",
                r.message
            ),
            ErrorCode::Internal => format!("The sandbox failed internally: {}", r.message),
            ErrorCode::Draining => format!(
                "This PRIMS node is restarting ({}). Retry in a few seconds.",
                r.message
            ),
            ErrorCode::Stopping => format!(
                "The PRIMS server is stopping: {}. Retry once it is back.",
                r.message
            ),
            _ => r.message.clone(),
        },
        e if e.is_unavailable() => {
            tracing::warn!(error = %e, "supervisor unavailable");
            "The sandbox service is unavailable right now; retry in a few seconds.".into()
        }
        other => {
            tracing::error!(error = %other, "supervisor protocol error");
            "The sandbox service answered unexpectedly; retry, and report this if it persists."
                .into()
        }
    }
}
