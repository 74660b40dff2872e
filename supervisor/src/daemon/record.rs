//! A finished run as the record its session's history keeps: the code,
//! its text output (capped), its rich outputs, the exception it ended with
//! and whether its interpreter was new.

use prims_protocol::history::{CellError, HistoryCell};
use prims_protocol::jail::Status;
use prims_protocol::wire::{InterpreterState, RunReply};

/// Bytes of stdout and of stderr a record keeps; the notebook is a record
/// of the session, and the run's reply already carried the whole.
const MAX_STREAM_BYTES: usize = 256 * 1024;
/// The line IPython's tracebacks begin with.
const IPYTHON_RULE: &str =
    "---------------------------------------------------------------------------\n";
/// The line Python's own tracebacks begin with.
const PYTHON_HEAD: &str = "Traceback (most recent call last):";

/// The record of a run of `code` that replied `reply`; `None` for a run
/// whose jail never started (nothing ran).
pub(super) fn record(code: &str, reply: &RunReply) -> Option<HistoryCell> {
    if reply.outcome.status == Status::SetupError {
        return None;
    }
    let (stdout, mut cut) = capped(&reply.stdout);
    let (mut stderr, stderr_cut) = capped(&reply.stderr);
    cut |= stderr_cut || reply.stdout_truncated || reply.stderr_truncated;
    let mut error = None;
    if reply.outcome.status == Status::Error {
        let (before, e) = split_traceback(&stderr);
        stderr = before;
        error = Some(e);
    }
    let restarted = match reply.interpreter.state {
        InterpreterState::Reset => reply.interpreter.reason,
        InterpreterState::Kept | InterpreterState::New => None,
    };
    Some(HistoryCell {
        n: 0,
        code: code.to_owned(),
        status: reply.outcome.status,
        stdout,
        stderr,
        cut: cut || reply.outputs_dropped > 0,
        outputs: reply.outputs.clone(),
        error,
        restarted,
    })
}

/// At most [`MAX_STREAM_BYTES`] of `bytes` as text, and whether it was cut.
fn capped(bytes: &[u8]) -> (String, bool) {
    let cut = bytes.len() > MAX_STREAM_BYTES;
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(MAX_STREAM_BYTES)]);
    (text.into_owned(), cut)
}

/// stderr before the last traceback, and the exception that traceback
/// shows (its last line is `Name: value`, as Python prints it).
fn split_traceback(stderr: &str) -> (String, CellError) {
    let start = line_start(stderr, IPYTHON_RULE).or_else(|| line_start(stderr, PYTHON_HEAD));
    let (before, tb) = match start {
        Some(i) => stderr.split_at(i),
        None => ("", stderr),
    };
    let traceback: Vec<String> = tb.trim_end().lines().map(str::to_owned).collect();
    let last = traceback
        .iter()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map_or("", String::as_str);
    let (name, value) = match last.split_once(": ") {
        Some((n, v)) if !n.contains(char::is_whitespace) => (n, v),
        _ if !last.is_empty() && !last.contains(char::is_whitespace) => (last, ""),
        _ => ("Exception", last),
    };
    // A notebook names the type alone, as `type(e).__name__`.
    let ename = name.rsplit('.').next().unwrap_or(name).to_owned();
    let error = CellError {
        ename,
        evalue: value.to_owned(),
        traceback,
    };
    (before.to_owned(), error)
}

/// Where the last line that starts with `prefix` begins.
fn line_start(text: &str, prefix: &str) -> Option<usize> {
    text.match_indices(prefix)
        .map(|(i, _)| i)
        .filter(|&i| i == 0 || text.as_bytes()[i - 1] == b'\n')
        .last()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipython_tracebacks_are_split_from_what_came_before() {
        let err = format!(
            "a warning\n{IPYTHON_RULE}ZeroDivisionError                         \
             Traceback (most recent call last)\nCell In[3], line 1\n----> 1 1/0\n\n\
             ZeroDivisionError: division by zero\n"
        );
        let (before, e) = split_traceback(&err);
        assert_eq!(before, "a warning\n");
        assert_eq!(e.ename, "ZeroDivisionError");
        assert_eq!(e.evalue, "division by zero");
        assert_eq!(e.traceback.len(), 6);
        assert_eq!(e.traceback[0], IPYTHON_RULE.trim_end());
    }

    #[test]
    fn plain_python_tracebacks_and_odd_ones() {
        let err = "Traceback (most recent call last):\n  File \"<cell 1>\", line 1\n\
                   json.decoder.JSONDecodeError: Expecting value: line 1\n";
        let (before, e) = split_traceback(err);
        assert_eq!(before, "");
        assert_eq!(e.ename, "JSONDecodeError");
        assert_eq!(e.evalue, "Expecting value: line 1");

        let (_, e) = split_traceback("KeyboardInterrupt\n");
        assert_eq!(
            (e.ename.as_str(), e.evalue.as_str()),
            ("KeyboardInterrupt", "")
        );
        let (_, e) = split_traceback("");
        assert_eq!(e.ename, "Exception");
        assert!(e.traceback.is_empty());
    }

    #[test]
    fn streams_are_capped() {
        let (s, cut) = capped(&vec![b'a'; MAX_STREAM_BYTES + 1]);
        assert!(cut && s.len() == MAX_STREAM_BYTES);
        assert_eq!(capped(b"\xffok"), ("\u{fffd}ok".to_string(), false));
    }
}
