//! A session's history: one record per finished run, kept by the
//! supervisor next to the session's metadata and read back a page at a
//! time, which the front-end turns into a Jupyter notebook.

use crate::cell::{CellOutput, ResetReason};
use crate::jail::Status;
use serde::{Deserialize, Serialize};

/// Most bytes of records one `History` reply carries (a single record
/// larger than this still goes alone); with [`MAX_RECORD_BYTES`] a page
/// stays well inside one frame.
pub const MAX_PAGE_BYTES: usize = 4 * 1024 * 1024;
/// Most bytes one stored record takes as a JSON line; a larger one is cut
/// (its outputs first) before it is kept.
pub const MAX_RECORD_BYTES: usize = 3 * 1024 * 1024;

/// One run of a session, as recorded after it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub struct HistoryCell {
    /// The run's number in the session, from 1, counting runs that were
    /// dropped since to keep within the bounds.
    pub n: u64,
    pub code: String,
    /// How the run ended.
    pub status: Status,
    /// The text it wrote to stdout and stderr, cut to a cap (lossy UTF-8).
    /// On an exception, stderr holds what came before its traceback.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stdout: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stderr: String,
    /// Streams, outputs or code were cut to keep the record small.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cut: bool,
    /// Its displays and result, as the run returned them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<CellOutput>,
    /// The exception it ended with, for `status: error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<CellError>,
    /// The run had a new interpreter in place of an older one, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarted: Option<ResetReason>,
}

/// An exception as a notebook shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub struct CellError {
    pub ename: String,
    pub evalue: String,
    /// The traceback's lines.
    pub traceback: Vec<String>,
}

/// A page of a session's history, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub struct HistoryPage {
    pub cells: Vec<HistoryCell>,
    /// Earlier runs no longer kept (the bounds dropped them).
    pub dropped: u64,
    /// Ask again `from` this to get the rest; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<u64>,
}
