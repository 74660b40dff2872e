//! Runs detached from the connection that started them (MCP tasks): the
//! supervisor owns them, so they outlive the front-end's connection, and
//! the front-end itself.

use crate::wire::{ErrorReply, RunReply};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Working,
    /// The run ended; `result` or `error` says how.
    Completed,
    /// Cancelled by `CancelTask` (or by a supervisor shutdown).
    Cancelled,
    /// The result was dropped to keep task results within their memory cap.
    Evicted,
}

/// A task as `GetTask` reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub struct TaskInfo {
    /// 128 random bits in hex: unguessable, like a session id.
    pub task_id: String,
    pub session_id: String,
    pub status: TaskStatus,
    /// Unix milliseconds.
    pub created_ms: u64,
    pub updated_ms: u64,
    /// From creation; the task is forgotten after it (never while working).
    pub ttl_ms: u64,
    /// What the run replied, once `Completed` and the run succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<RunReply>,
    /// Why the run failed, once `Completed` and it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorReply>,
}
