//! The error every tool reports: a message for the model, returned as an
//! `isError` tool result rather than a protocol error.

use prims_protocol::client::ClientError;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ToolError(pub String);

impl ToolError {
    pub fn new(message: impl Into<String>) -> ToolError {
        ToolError(message.into())
    }
}

impl From<ClientError> for ToolError {
    fn from(e: ClientError) -> ToolError {
        ToolError(crate::supervisor::describe(&e))
    }
}
