//! Branching a live session: its forks, its checkpoints and a rollback to
//! one. The globals travel pickled and are unpickled only in the jail of
//! the session that gets them; the files are copied, never shared.

use crate::cell::NotRestored;
use serde::{Deserialize, Serialize};

/// What `ForkSession` made: one new session per branch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub struct ForkReply {
    pub sessions: Vec<Branch>,
    /// From the request's turn in the source session to the last branch
    /// being ready for its first call.
    pub duration_ms: u64,
    /// How long the source session was held: its globals saved and its
    /// files copied (its calls wait meanwhile).
    pub source_paused_ms: u64,
}

/// One branch of a fork: a session of its own, with what of the source's
/// globals it holds and what it could not be given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub struct Branch {
    pub session_id: String,
    pub restored: Vec<String>,
    pub not_restored: Vec<NotRestored>,
}

/// A checkpoint of a session: its globals and its files at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub struct CheckpointInfo {
    pub checkpoint_id: String,
    #[serde(default)]
    pub label: Option<String>,
    /// Unix seconds.
    pub created: u64,
    /// What it takes on disk: the pickled globals and the copied files.
    pub bytes: u64,
    /// Globals that could not be saved, with why.
    pub not_saved: Vec<NotRestored>,
    /// How long the session was held while it was taken.
    #[serde(default)]
    pub paused_ms: u64,
}

/// What a rollback to a checkpoint gave the session's interpreter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub struct RestoreReply {
    pub restored: Vec<String>,
    pub not_restored: Vec<NotRestored>,
    pub duration_ms: u64,
}
