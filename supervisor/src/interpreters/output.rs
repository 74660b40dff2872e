//! Cutting a live interpreter's stdout and stderr into cells. The agent
//! ends each cell's output on both pipes with a marker fresh to that cell,
//! after everything the cell (and any subprocess it waited for) wrote; the
//! supervisor reads the pipes in chunks of any size and boundary and feeds
//! them here. Pure code, no I/O.

use super::agent::{marker_bytes, MARKER_HEX_LEN};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Finds `\0prims-cell-end-<hex>\0` in a stream fed chunk by chunk, even
/// when the marker is split across chunks. It holds back only bytes that
/// could start the marker (at most its length less one), and since those
/// are the marker's own first bytes it needs no buffer for them.
#[derive(Debug, Clone)]
pub(crate) struct MarkerScan {
    marker: Vec<u8>,
    /// Knuth-Morris-Pratt: `fail[i]` is the length of the longest proper
    /// prefix of `marker[..=i]` that is also a suffix of it.
    fail: Vec<usize>,
    /// The stream so far ends with `marker[..matched]`: held back.
    matched: usize,
    found: bool,
}

impl MarkerScan {
    pub(crate) fn new(marker_hex: &str) -> Self {
        Self::for_marker(marker_bytes(marker_hex))
    }

    fn for_marker(marker: Vec<u8>) -> Self {
        let mut fail = vec![0; marker.len()];
        let mut k = 0;
        for i in 1..marker.len() {
            while k > 0 && marker[i] != marker[k] {
                k = fail[k - 1];
            }
            if marker[i] == marker[k] {
                k += 1;
            }
            fail[i] = k;
        }
        MarkerScan {
            marker,
            fail,
            matched: 0,
            found: false,
        }
    }

    /// Bytes before the marker (or all the bytes that can no longer be part
    /// of it) go to `out`; returns `Some(rest_after_marker)` once the marker
    /// is found. Only the first marker counts: after it, every chunk comes
    /// back whole as rest.
    pub(crate) fn feed(&mut self, chunk: &[u8], out: &mut dyn FnMut(&[u8])) -> Option<Vec<u8>> {
        if self.found {
            return Some(chunk.to_vec());
        }
        // The stream seen by this call is marker[..held] followed by chunk.
        let held = self.matched;
        let len = self.marker.len();
        let mut state = held;
        let mut i = 0;
        while i < chunk.len() {
            if state == 0 {
                // Nothing held: skip to the next byte that can start a marker.
                match chunk[i..].iter().position(|&b| b == self.marker[0]) {
                    Some(skip) => i += skip,
                    None => break,
                }
            }
            let b = chunk[i];
            while state > 0 && self.marker[state] != b {
                state = self.fail[state - 1];
            }
            if self.marker[state] == b {
                state += 1;
            }
            i += 1;
            if state == len {
                self.emit(held, chunk, held + i - len, out);
                self.found = true;
                self.matched = 0;
                return Some(chunk[i..].to_vec());
            }
        }
        self.emit(held, chunk, held + chunk.len() - state, out);
        self.matched = state;
        None
    }

    /// The stream ended (or the wait for the marker gave up): release the
    /// held-back bytes.
    pub(crate) fn finish(self, out: &mut dyn FnMut(&[u8])) {
        if !self.found && self.matched > 0 {
            out(&self.marker[..self.matched]);
        }
    }

    #[cfg(test)]
    /// Bytes held back, waiting to see whether they start the marker.
    pub(crate) fn held(&self) -> usize {
        self.matched
    }

    /// Pass on the first `upto` bytes of marker[..held] followed by chunk.
    fn emit(&self, held: usize, chunk: &[u8], upto: usize, out: &mut dyn FnMut(&[u8])) {
        let from_held = upto.min(held);
        if from_held > 0 {
            out(&self.marker[..from_held]);
        }
        if upto > held {
            out(&chunk[..upto - held]);
        }
    }
}

/// One cell's kept output of one stream, capped at `cap` bytes; past the cap
/// bytes are only counted.
#[derive(Debug, Clone)]
pub(crate) struct Capped {
    kept: Vec<u8>,
    cap: usize,
    seen: u64,
}

impl Capped {
    pub(crate) fn new(cap: usize) -> Self {
        Capped {
            kept: Vec::new(),
            cap,
            seen: 0,
        }
    }

    /// Keep what fits of `chunk`; returns the part kept, for streaming.
    pub(crate) fn push<'a>(&mut self, chunk: &'a [u8]) -> &'a [u8] {
        self.seen = self.seen.saturating_add(chunk.len() as u64);
        let room = self.cap.saturating_sub(self.kept.len());
        let part = &chunk[..chunk.len().min(room)];
        self.kept.extend_from_slice(part);
        part
    }

    #[cfg(test)]
    /// Bytes pushed, kept or not.
    pub(crate) fn seen(&self) -> u64 {
        self.seen
    }

    pub(crate) fn truncated(&self) -> bool {
        self.seen > self.kept.len() as u64
    }

    /// The kept bytes, and whether any were dropped.
    pub(crate) fn into_parts(self) -> (Vec<u8>, bool) {
        let truncated = self.truncated();
        (self.kept, truncated)
    }
}

/// A fresh cell marker: [`MARKER_HEX_LEN`] lowercase hex digits from the OS
/// generator.
pub(crate) fn new_marker() -> String {
    static FALLBACKS: AtomicU64 = AtomicU64::new(0);
    let mut bytes = [0u8; MARKER_HEX_LEN / 2];
    if let Err(e) = getrandom::fill(&mut bytes) {
        // A guessable marker only lets a cell's output end its own cell
        // early, which it could do anyway by reading the marker from the
        // agent's memory.
        tracing::warn!(error = %e, "no OS randomness for a cell marker; using the clock");
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let count = FALLBACKS.fetch_add(1, Ordering::Relaxed);
        bytes = (nanos ^ (u128::from(count) << 64)).to_le_bytes();
    }
    hex::encode(bytes)
}

#[cfg(test)]
mod tests;
