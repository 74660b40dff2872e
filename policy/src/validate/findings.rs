//! What the rules report: each violation with the key paths that locate it.

use crate::spans::KeyPath;

/// A rule violation: the first path names it, the rest are fallbacks for
/// locating it when the first key is not in the file.
pub struct Finding {
    pub paths: Vec<KeyPath>,
    pub message: String,
}

#[derive(Default)]
pub(super) struct Findings(pub(super) Vec<Finding>);

impl Findings {
    pub(super) fn add(&mut self, path: KeyPath, message: String) {
        self.0.push(Finding {
            paths: vec![path],
            message,
        });
    }

    /// A finding about `path`, located at `or` when the file lacks `path`
    /// (a missing key is found at its table).
    pub(super) fn add_or(&mut self, path: KeyPath, or: KeyPath, message: String) {
        self.0.push(Finding {
            paths: vec![path, or],
            message,
        });
    }
}
