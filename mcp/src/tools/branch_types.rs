//! The arguments and results of the branching tools: `fork_session`,
//! `checkpoint_session` and `restore_checkpoint`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct ForkSessionParams {
    /// The session to branch, from an earlier result.
    #[schemars(extend("x-mcp-header" = "Session-Id"))]
    pub(crate) session_id: String,
    /// How many branches: 1 (the default) to the server's maximum (8 by
    /// default).
    #[serde(default)]
    pub(crate) count: Option<u32>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ForkSessionOutput {
    /// The new sessions, one per branch: pass a branch's session_id to
    /// run_code to work in it. Each has its own copy of the source's files
    /// and variables; no branch sees another's writes, nor the source's.
    pub(crate) sessions: Vec<BranchOut>,
    /// From the request to the last branch being ready.
    pub(crate) duration_ms: u64,
    /// How long the source session was paused (its variables saved and its
    /// files copied); its calls waited meanwhile.
    pub(crate) source_paused_ms: u64,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct BranchOut {
    pub(crate) session_id: String,
    /// The source's variables this branch has (functions, classes and
    /// lambdas defined in cells included).
    pub(crate) restored: Vec<String>,
    /// Variables it could not be given, with why (a generator, an open
    /// file, a thread).
    pub(crate) not_restored: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct CheckpointSessionParams {
    /// The session to checkpoint, from an earlier result.
    #[schemars(extend("x-mcp-header" = "Session-Id"))]
    pub(crate) session_id: String,
    /// A note for yourself, e.g. "before the join" (at most 256 characters).
    #[serde(default)]
    pub(crate) label: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CheckpointSessionOutput {
    /// Pass it to restore_checkpoint to roll the session back here.
    pub(crate) checkpoint_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) label: Option<String>,
    /// What it takes on disk: the variables and a copy of the files.
    pub(crate) bytes: u64,
    /// Variables that could not be saved, with why.
    pub(crate) not_saved: BTreeMap<String, String>,
    /// How long the session was paused while it was taken.
    pub(crate) paused_ms: u64,
    pub(crate) session_id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct RestoreCheckpointParams {
    /// The session to roll back.
    #[schemars(extend("x-mcp-header" = "Session-Id"))]
    pub(crate) session_id: String,
    /// A checkpoint_id from checkpoint_session on this session.
    pub(crate) checkpoint_id: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct RestoreCheckpointOutput {
    /// The variables the session has again; every other variable is gone,
    /// and the workspace files are those of the checkpoint.
    pub(crate) restored: Vec<String>,
    pub(crate) not_restored: BTreeMap<String, String>,
    pub(crate) duration_ms: u64,
    pub(crate) session_id: String,
}
