//! What a cell of a live interpreter gives back beyond its text: its rich
//! outputs, and why its interpreter is a new one. Shared by a run's reply
//! ([`crate::wire`]) and a session's history ([`crate::history`]).

use serde::{Deserialize, Serialize};

/// One rich output of a cell: a mime bundle (mime type to value: text,
/// base64 for images, any JSON for `application/json`), `text/plain`
/// always among them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CellOutput {
    #[serde(rename = "type")]
    pub kind: OutputKind,
    pub data: std::collections::BTreeMap<String, serde_json::Value>,
    /// A value was cut or left out to keep within the limits.
    #[serde(default)]
    pub cut: bool,
    /// For a figure: its copy, `output/figures/<name>.png`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputKind {
    /// Shown by `display()` (or a figure).
    Display,
    /// The value of the cell's last expression.
    Result,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResetReason {
    FirstCall,
    /// The run asked for `fresh`.
    FreshRequested,
    /// The run's requirements (or interpreter) differ from the last run's.
    RequirementsChanged,
    /// The run asked for a package at another version than the one the
    /// session has, which only a new environment could give it.
    RequirementsConflict,
    /// The run's memory or process limit differs from the one the
    /// interpreter was started with, which holds for its whole life.
    LimitsChanged,
    /// The policy's network mode changed since the interpreter started.
    NetworkChanged,
    /// The previous run timed out and did not stop when interrupted.
    TimedOut,
    OutOfMemory,
    /// The previous run ended the interpreter (`os._exit`, a fatal signal).
    CodeExited,
    /// Its channel broke: the code closed or wrote over it.
    ChannelBroken,
    /// Unused for `interpreters.idle_ttl`.
    StoppedIdle,
    /// Stopped to make room under `interpreters.max_live*`.
    StoppedForRoom,
    /// The previous run was cancelled, which stops its interpreter.
    Cancelled,
    ServerRestarted,
}

/// A global a new interpreter (after a stop, a fork, a rollback) could not
/// be given, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub struct NotRestored {
    pub name: String,
    pub why: String,
}
