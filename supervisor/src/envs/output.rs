//! uv's output during a build: split into lines, streamed as throttled
//! progress, and the tail kept for the error message.

use crate::job::Stream;
use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Lines of uv output kept for an error message.
pub(super) const TAIL_LINES: usize = 40;
/// Bytes of uv output kept for an error message.
pub(super) const TAIL_BYTES: usize = 4096;
/// At most this many progress messages per second.
const PROGRESS_INTERVAL: Duration = Duration::from_millis(200);
/// Longest single line kept or reported.
const LINE_MAX: usize = 1024;

/// Strip ANSI escape sequences and control characters (tabs stay).
pub(super) fn clean_line(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw);
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ params final-byte; other escapes: ESC + one char.
            if chars.next_if_eq(&'[').is_some() {
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            } else {
                chars.next();
            }
        } else if c == '\t' || !c.is_control() {
            out.push(c);
        }
    }
    let trimmed = out.trim_end();
    match trimmed.char_indices().nth(LINE_MAX) {
        Some((i, _)) => format!("{}…", &trimmed[..i]),
        None => trimmed.to_string(),
    }
}

/// The last lines of `bytes`, cleaned, at most [`TAIL_LINES`] lines and
/// [`TAIL_BYTES`] bytes.
pub(super) fn tail(bytes: &[u8]) -> String {
    let mut t = Tail::default();
    for line in bytes.split(|b| *b == b'\n') {
        t.push(clean_line(line));
    }
    t.text()
}

#[derive(Debug, Default)]
struct Tail {
    lines: VecDeque<String>,
}

impl Tail {
    fn push(&mut self, line: String) {
        if line.is_empty() {
            return;
        }
        if self.lines.len() == TAIL_LINES {
            self.lines.pop_front();
        }
        self.lines.push_back(line);
    }

    fn text(&self) -> String {
        let joined = self.lines.iter().cloned().collect::<Vec<_>>().join("\n");
        if joined.len() <= TAIL_BYTES {
            return joined;
        }
        let mut start = joined.len() - TAIL_BYTES;
        while !joined.is_char_boundary(start) {
            start += 1;
        }
        format!("…{}", &joined[start..])
    }
}

#[derive(Default)]
struct State {
    partial: [Vec<u8>; 2],
    tail: Tail,
    last_progress: Option<Instant>,
    /// The latest line the throttle held back, reported at the end.
    held: Option<String>,
}

/// Collects a build's stdout and stderr, fed from the runner's threads.
pub(super) struct Collector<'a> {
    state: Mutex<State>,
    progress: &'a (dyn Fn(String) + Sync),
}

impl<'a> Collector<'a> {
    pub(super) fn new(progress: &'a (dyn Fn(String) + Sync)) -> Self {
        Collector {
            state: Mutex::new(State::default()),
            progress,
        }
    }

    pub(super) fn feed(&self, stream: Stream, chunk: &[u8]) {
        let i = usize::from(stream == Stream::Stderr);
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.partial[i].extend_from_slice(chunk);
        while let Some(pos) = st.partial[i].iter().position(|b| *b == b'\n') {
            let raw: Vec<u8> = st.partial[i].drain(..=pos).collect();
            let line = clean_line(&raw);
            self.line(&mut st, line);
        }
        // A line that never ends must not grow without bound.
        if st.partial[i].len() > LINE_MAX * 4 {
            let raw = std::mem::take(&mut st.partial[i]);
            let line = clean_line(&raw);
            self.line(&mut st, line);
        }
    }

    fn line(&self, st: &mut State, line: String) {
        if line.is_empty() {
            return;
        }
        let due = st
            .last_progress
            .is_none_or(|t| t.elapsed() >= PROGRESS_INTERVAL);
        if due {
            st.last_progress = Some(Instant::now());
            st.held = None;
            (self.progress)(line.clone());
        } else {
            st.held = Some(line.clone());
        }
        st.tail.push(line);
    }

    /// Everything kept, once the streams have ended.
    pub(super) fn finish(&self) -> String {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        for i in 0..2 {
            let raw = std::mem::take(&mut st.partial[i]);
            let line = clean_line(&raw);
            if !line.is_empty() {
                st.held = Some(line.clone());
            }
            st.tail.push(line);
        }
        if let Some(last) = st.held.take() {
            (self.progress)(last);
        }
        st.tail.text()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_ansi_and_keeps_the_tail() {
        assert_eq!(
            clean_line(b"\x1b[31merror\x1b[0m: No solution found\r"),
            "error: No solution found"
        );
        let many: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let t = tail(many.as_bytes());
        assert!(t.starts_with("line 60\n") && t.ends_with("line 99"), "{t}");
        let long = "x".repeat(10_000);
        assert!(tail(format!("{long}\n{long}\n").as_bytes()).len() <= TAIL_BYTES + 4);
    }

    #[test]
    fn throttles_progress_but_keeps_every_line() {
        let seen = Mutex::new(Vec::new());
        let p = |s: String| seen.lock().unwrap().push(s);
        let c = Collector::new(&p);
        c.feed(Stream::Stderr, b"a\nb\nc");
        c.feed(Stream::Stdout, b"d\n");
        assert_eq!(c.finish(), "a\nb\nd\nc");
        // The first line at once, the last one at the end.
        assert_eq!(*seen.lock().unwrap(), vec!["a", "c"]);
    }
}
