//! The supervisor's side of the channel to a live interpreter's agent: an
//! AF_UNIX stream socket whose other end is fd 3 in the jail. Frames both
//! ways are a 4-byte big-endian length and a UTF-8 JSON object, at most
//! [`SUPERVISOR_FRAME_MAX`] bytes towards the agent and [`AGENT_FRAME_MAX`]
//! from it.
//!
//! This is a trust boundary. Code in the jail can write anything to the
//! channel, so every frame from the agent is read with a size limit and a
//! deadline ([`FRAME_DEADLINE`] from its first byte), parsed strictly (no
//! unknown ops or fields) and checked against the agent's caps. The first
//! bad frame ends the stream: the session's interpreter is then beyond use,
//! and nothing it says afterwards is read. Nothing here trusts a number the
//! cgroup can measure instead.
//!
//! The messages, supervisor to agent:
//!
//! - `cell {id, code}`: run `code` in the session's globals. Answered by
//!   `done`.
//! - `mark {marker}`: sent once the cell's `done` is confirmed (python's
//!   main thread back in the agent's read). The marker is
//!   [`MARKER_HEX_LEN`] lowercase hex digits, fresh per cell and made only
//!   then, so the cell's code never had it to forge; the agent ends the
//!   cell's output on both stdout and stderr with [`marker_bytes`] so the
//!   streams can be cut into cells ([`super::output`]). Not answered.
//! - `save {path}`: pickle what it can of the globals into one file at
//!   `path` (a path in the jail). Answered by `saved`.
//! - `restore {path}`: load such a file into the globals and delete it; a
//!   missing file restores nothing. Answered by `restored`. Unpickling
//!   happens only in the jail.
//! - `discard {path}`: delete such a file unread (the call asked for a
//!   fresh interpreter). Answered by `discarded`.
//! - `sync {nonce}`: answered by `synced` with the same nonce, after which
//!   nothing the agent sent before reading it is still on its way (see
//!   [`super::settled`]).
//! - `warm_up {code}`: to a warm-pool spare, before any cell: run what
//!   IPython sets up lazily on a first cell, outside the history and the
//!   execution count, then `code` (`python.warm_up_code`) in a namespace of
//!   its own, its output discarded. Answered by `warmed_up`.
//!
//! Agent to supervisor:
//!
//! - `ready {python, imported, failed, import_ms}`: sent once, before any
//!   cell: the interpreter's version and which `PRIMS_PREWARM` modules
//!   imported or failed (with why). `import_ms` is the agent's own word,
//!   good only for logs.
//! - `output {id, type, data, cut, file?}`: a rich output of the running
//!   cell (`type` `display` or `result`), sent before its `done`: a mime
//!   bundle of the types in [`MIME_KEPT`], `text/plain` among them; `file`
//!   names a figure's copy under `output/figures/`. At most [`OUTPUTS_MAX`]
//!   per cell, the rest dropped and counted in `done`.
//! - `done {id, status, exit_code, exception, result, result_truncated,
//!   outputs_dropped}`:
//!   a cell ended. `status` is `ok`, `error` (an exception, whose type name
//!   is `exception`; the traceback went to stderr) or `exit` (SystemExit
//!   with a non-zero code). `result` is the repr of a last expression that
//!   was not None, cut to [`RESULT_MAX_CHARS`].
//! - `saved {saved, skipped}` and `restored {restored, failed}`: the names
//!   that made it, and `{name, why}` for those that did not.
//! - `discarded {}`: the saved globals are gone.
//! - `warmed_up {error}`: the answer to `warm_up`; `error` says why the
//!   code raised, if it did.
//! - `synced {nonce}`: the answer to `sync`.
//! - `error {message}`: the agent could not act on a message.
//!
//! Every list holds at most [`LIST_MAX`] entries and every name or why at
//! most [`NAME_MAX_CHARS`] characters. Whether a message makes sense now
//! (a `done` for the cell that runs, a single `ready`) is the caller's
//! business; this module vouches only for its shape and size.

#[cfg(doc)]
use super::agent::OUTPUTS_MAX;
#[cfg(doc)]
use super::agent::{marker_bytes, MARKER_HEX_LEN};
use super::agent::{
    AGENT_FRAME_MAX, CHART_MIME, FIGURES_REL, LIST_MAX, MESSAGE_MAX_CHARS, MIME_KEPT,
    NAME_MAX_CHARS, RESULT_MAX_CHARS, SUPERVISOR_FRAME_MAX,
};
use prims_protocol::frame::{self, FrameError, FrameReader, HEADER_BYTES};
use prims_protocol::wire::{CellOutput, OutputKind};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io;
use std::os::fd::OwnedFd;
use std::time::Duration;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;
use tokio::sync::mpsc;

/// A frame from the agent that has started must end within this.
pub(crate) const FRAME_DEADLINE: Duration = Duration::from_secs(5);

/// Parsed frames waiting for the caller; the reader stops reading while it
/// is full, so a chatty agent costs a bounded amount of memory.
const QUEUE_FRAMES: usize = 4;

/// Slack over [`RESULT_MAX_CHARS`] before a result counts as malformed.
const RESULT_SLACK_CHARS: usize = 64;

/// Characters kept of a parse error's text (it may quote the hostile input).
const ERROR_TEXT_MAX_CHARS: usize = 200;

/// Characters in the interpreter version `ready` reports.
const VERSION_MAX_CHARS: usize = 32;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(crate) enum ToAgent {
    Cell {
        id: u64,
        code: String,
    },
    /// End the cell's output with this marker (see the module's doc).
    Mark {
        marker: String,
    },
    Save {
        path: String,
        /// Synced to disk before the answer (a stop's save); a fork's,
        /// read at once, is not.
        durable: bool,
        /// Each value loaded again in a throw-away child, and one that
        /// fails named (a checkpoint's save: the agent's `trial`).
        check: bool,
    },
    Restore {
        path: String,
    },
    Discard {
        path: String,
    },
    Sync {
        nonce: String,
    },
    WarmUp {
        code: String,
    },
    /// A line of an install's progress (`%pip install` in the cell).
    InstallProgress {
        line: String,
    },
    /// The install the cell asked for is over.
    Installed {
        ok: bool,
        added: Vec<String>,
        message: String,
    },
    /// To a fork template: fork a child for the socket this frame carries.
    Fork {
        id: u64,
    },
    /// Set these variables of the session's environment (its secrets'
    /// placeholders), and remove those.
    Environ {
        set: std::collections::BTreeMap<String, String>,
        unset: Vec<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum FromAgent {
    Ready {
        python: String,
        imported: Vec<String>,
        failed: Vec<Named>,
        import_ms: u64,
        /// The IPython version cells run through, if the IPython layer is
        /// there and started.
        #[serde(default)]
        ipython: Option<String>,
        /// Why IPython did not start, when the layer is there.
        #[serde(default)]
        ipython_error: Option<String>,
    },
    Output(AgentOutput),
    Done(CellDone),
    Saved {
        saved: Vec<String>,
        skipped: Vec<Named>,
    },
    Restored {
        restored: Vec<String>,
        failed: Vec<Named>,
    },
    Discarded {},
    WarmedUp {
        error: Option<String>,
    },
    Synced {
        nonce: String,
    },
    EnvironSet {},
    /// The running cell asks for packages (`%pip install`).
    Install {
        id: u64,
        requirements: Vec<String>,
    },
    /// A fork template forked the child of `fork` frame `id`.
    Forked {
        id: u64,
    },
    Error {
        message: String,
    },
}

impl FromAgent {
    /// The message's `op`, for logs and errors.
    pub(crate) fn op(&self) -> &'static str {
        match self {
            FromAgent::Ready { .. } => "ready",
            FromAgent::Output(_) => "output",
            FromAgent::Done(_) => "done",
            FromAgent::Saved { .. } => "saved",
            FromAgent::Restored { .. } => "restored",
            FromAgent::Discarded {} => "discarded",
            FromAgent::WarmedUp { .. } => "warmed_up",
            FromAgent::Synced { .. } => "synced",
            FromAgent::EnvironSet {} => "environ_set",
            FromAgent::Install { .. } => "install",
            FromAgent::Forked { .. } => "forked",
            FromAgent::Error { .. } => "error",
        }
    }
}

/// How a cell ended, as the agent tells it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CellDone {
    pub id: u64,
    pub status: CellStatus,
    pub exit_code: Option<i32>,
    /// The exception's type name, for `status: error`.
    pub exception: Option<String>,
    /// The repr of a last expression that was not None.
    pub result: Option<String>,
    pub result_truncated: bool,
    /// Outputs past the agent's limits, not sent.
    #[serde(default)]
    pub outputs_dropped: u32,
}

/// A rich output of the running cell.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AgentOutput {
    pub id: u64,
    #[serde(rename = "type")]
    pub kind: OutputKind,
    pub data: BTreeMap<String, serde_json::Value>,
    pub cut: bool,
    #[serde(default)]
    pub file: Option<String>,
}

impl AgentOutput {
    /// Its bytes as the caps count them: its values, as JSON.
    pub(crate) fn bytes(&self) -> usize {
        self.data
            .values()
            .map(|v| serde_json::to_vec(v).map_or(0, |b| b.len()))
            .sum()
    }

    pub(crate) fn into_output(self) -> CellOutput {
        CellOutput {
            kind: self.kind,
            data: self.data,
            cut: self.cut,
            file: self.file,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum CellStatus {
    Ok,
    /// An exception; its traceback went to stderr.
    Error,
    /// SystemExit with a non-zero code.
    Exit,
}

/// A name that did not make it, and why.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Named {
    pub name: String,
    pub why: String,
}

impl From<Named> for prims_protocol::wire::NotRestored {
    fn from(n: Named) -> Self {
        prims_protocol::wire::NotRestored {
            name: n.name,
            why: n.why,
        }
    }
}

impl From<prims_protocol::wire::NotRestored> for Named {
    fn from(n: prims_protocol::wire::NotRestored) -> Self {
        Named {
            name: n.name,
            why: n.why,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum ChannelError {
    #[error("the interpreter closed its channel")]
    Closed,
    #[error("the interpreter's channel broke: {0}")]
    Frame(#[source] FrameError),
    #[error("the interpreter sent a malformed message: {0}")]
    Malformed(String),
    #[error("writing to the interpreter failed: {0}")]
    Write(#[source] io::Error),
}

/// What the agent said, frame by frame, as the reader task parsed it; the
/// stream ends after the first error.
pub(crate) type Incoming = mpsc::Receiver<Result<FromAgent, ChannelError>>;

/// A connected channel: the supervisor's end, split into its writer and
/// reader (a task of the current runtime), and the agent's end, to become
/// fd 3 in the jail. Both ends are close-on-exec.
pub(crate) fn pair() -> io::Result<(AgentWriter, Incoming, OwnedFd)> {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
    ours.set_nonblocking(true)?;
    let (rd, wr) = UnixStream::from_std(ours)?.into_split();
    Ok((AgentWriter(wr), spawn_reader(rd), OwnedFd::from(theirs)))
}

/// Reading half: a task that parses frames and forwards them; ends after the
/// first error ([`ChannelError::Closed`] at a clean end of stream) or when
/// the receiver is dropped. A task, because a frame read is not cancel-safe
/// and the caller selects on the receiver.
pub(crate) fn spawn_reader(rd: OwnedReadHalf) -> Incoming {
    spawn_reader_within(rd, FRAME_DEADLINE)
}

/// [`spawn_reader`] with a frame deadline of `deadline`.
pub(crate) fn spawn_reader_within(rd: OwnedReadHalf, deadline: Duration) -> Incoming {
    let (tx, rx) = mpsc::channel(QUEUE_FRAMES);
    tokio::spawn(async move {
        let mut frames = FrameReader::new(rd).with_deadline(deadline);
        loop {
            let item = tokio::select! {
                // Nobody listens: abandoning a half-read frame is fine.
                () = tx.closed() => return,
                read = frames.next(AGENT_FRAME_MAX) => match read {
                    Ok(Some(body)) => parse(&body),
                    Ok(None) => Err(ChannelError::Closed),
                    Err(e) => Err(ChannelError::Frame(e)),
                },
            };
            let last = item.is_err();
            if tx.send(item).await.is_err() || last {
                return;
            }
        }
    });
    rx
}

/// Writing half. A send that is cancelled midway leaves a partial frame on
/// the stream, after which the channel is beyond use.
#[derive(Debug)]
pub(crate) struct AgentWriter(OwnedWriteHalf);

impl AgentWriter {
    #[cfg(test)]
    pub(crate) fn new(wr: OwnedWriteHalf) -> Self {
        AgentWriter(wr)
    }

    pub(crate) async fn send(&mut self, m: &ToAgent) -> Result<(), ChannelError> {
        let bytes = frame::encode(m).map_err(ChannelError::Frame)?;
        let len = bytes.len() - HEADER_BYTES;
        if len > SUPERVISOR_FRAME_MAX {
            return Err(ChannelError::Frame(FrameError::TooLarge {
                len,
                max: SUPERVISOR_FRAME_MAX,
            }));
        }
        frame::write_frame(&mut self.0, &bytes)
            .await
            .map_err(|e| match e {
                FrameError::Io(e) => ChannelError::Write(e),
                other => ChannelError::Frame(other),
            })
    }
}

impl AgentWriter {
    /// Sends `m` with `fd` attached (`SCM_RIGHTS`), to a fork template.
    /// The frame is small: what the first `sendmsg` leaves goes as usual.
    pub(crate) async fn send_with_fds(
        &mut self,
        m: &ToAgent,
        fds: &[std::os::fd::BorrowedFd<'_>],
    ) -> Result<(), ChannelError> {
        use std::os::fd::AsRawFd;
        let bytes = frame::encode(m).map_err(ChannelError::Frame)?;
        let stream: &UnixStream = self.0.as_ref();
        let fds: Vec<_> = fds.iter().map(|fd| fd.as_raw_fd()).collect();
        let sent = loop {
            stream.writable().await.map_err(ChannelError::Write)?;
            let r = stream.try_io(tokio::io::Interest::WRITABLE, || {
                let iov = [std::io::IoSlice::new(&bytes)];
                let cmsg = [nix::sys::socket::ControlMessage::ScmRights(&fds)];
                nix::sys::socket::sendmsg::<()>(
                    stream.as_raw_fd(),
                    &iov,
                    &cmsg,
                    nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
                    None,
                )
                .map_err(io::Error::from)
            });
            match r {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(ChannelError::Write(e)),
            }
        };
        if sent < bytes.len() {
            use tokio::io::AsyncWriteExt;
            self.0
                .write_all(&bytes[sent..])
                .await
                .map_err(ChannelError::Write)?;
        }
        Ok(())
    }
}

/// One frame body from the agent, parsed and checked.
pub(crate) fn parse(body: &[u8]) -> Result<FromAgent, ChannelError> {
    let msg: FromAgent = serde_json::from_slice(body)
        .map_err(|e| ChannelError::Malformed(shorten(&e.to_string())))?;
    check(&msg).map_err(ChannelError::Malformed)?;
    Ok(msg)
}

fn shorten(text: &str) -> String {
    match text.char_indices().nth(ERROR_TEXT_MAX_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// The agent's caps, enforced: what exceeds them did not come from the agent.
fn check(msg: &FromAgent) -> Result<(), String> {
    match msg {
        FromAgent::Ready {
            python,
            imported,
            failed,
            import_ms: _,
            ipython,
            ipython_error,
        } => {
            if let Some(v) = ipython {
                chars("ready.ipython", v, NAME_MAX_CHARS)?;
            }
            if let Some(e) = ipython_error {
                chars("ready.ipython_error", e, NAME_MAX_CHARS)?;
            }
            let version_ok = !python.is_empty()
                && python.len() <= VERSION_MAX_CHARS
                && python.bytes().all(|b| b.is_ascii_digit() || b == b'.');
            if !version_ok {
                return Err("ready: python is not a version number".into());
            }
            names("ready.imported", imported)?;
            named("ready.failed", failed)
        }
        FromAgent::Output(o) => output(o),
        FromAgent::Done(done) => {
            if let Some(exception) = &done.exception {
                chars("done.exception", exception, NAME_MAX_CHARS)?;
            }
            match &done.result {
                Some(result) => chars("done.result", result, RESULT_MAX_CHARS + RESULT_SLACK_CHARS),
                None => Ok(()),
            }
        }
        FromAgent::Saved { saved, skipped } => {
            names("saved.saved", saved)?;
            named("saved.skipped", skipped)
        }
        FromAgent::Restored { restored, failed } => {
            names("restored.restored", restored)?;
            named("restored.failed", failed)
        }
        FromAgent::Discarded {} | FromAgent::Forked { .. } | FromAgent::EnvironSet {} => Ok(()),
        FromAgent::WarmedUp { error } => match error {
            Some(e) => chars("warmed_up.error", e, MESSAGE_MAX_CHARS),
            None => Ok(()),
        },
        FromAgent::Synced { nonce } => chars("synced.nonce", nonce, NAME_MAX_CHARS),
        FromAgent::Install { requirements, .. } => names("install.requirements", requirements),
        FromAgent::Error { message } => chars("error.message", message, MESSAGE_MAX_CHARS),
    }
}

/// An output's mime types are the kept ones, `text/plain` among them, each
/// a string but JSON's (application/json and the chart's [`CHART_MIME`]);
/// a `file` is a PNG's name under `output/figures/`.
fn output(o: &AgentOutput) -> Result<(), String> {
    if !o.data.contains_key("text/plain") {
        return Err("output has no text/plain".into());
    }
    for (mime, value) in &o.data {
        if !MIME_KEPT.contains(&mime.as_str()) {
            return Err(format!(
                "output.data has a mime type not kept: {}",
                shorten(mime)
            ));
        }
        if mime != "application/json" && mime != CHART_MIME && !value.is_string() {
            return Err(format!("output.data[{mime}] is not a string"));
        }
    }
    if let Some(file) = &o.file {
        let name = file
            .strip_prefix(FIGURES_REL)
            .and_then(|f| f.strip_prefix('/'))
            .unwrap_or_default();
        let ok = name.len() <= NAME_MAX_CHARS
            && name.ends_with(".png")
            && !name.starts_with('.')
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
        if !ok {
            return Err("output.file is not a figure's name under output/figures/".into());
        }
    }
    Ok(())
}

fn chars(what: &str, text: &str, max: usize) -> Result<(), String> {
    // Bytes bound characters from above: most strings pass without a count.
    if text.len() > max && text.chars().count() > max {
        return Err(format!("{what} is over {max} characters"));
    }
    Ok(())
}

fn entries<T>(what: &str, list: &[T]) -> Result<(), String> {
    if list.len() > LIST_MAX {
        return Err(format!("{what} has over {LIST_MAX} entries"));
    }
    Ok(())
}

fn names(what: &str, list: &[String]) -> Result<(), String> {
    entries(what, list)?;
    list.iter().try_for_each(|n| chars(what, n, NAME_MAX_CHARS))
}

fn named(what: &str, list: &[Named]) -> Result<(), String> {
    entries(what, list)?;
    list.iter().try_for_each(|n| {
        chars(what, &n.name, NAME_MAX_CHARS)?;
        chars(what, &n.why, NAME_MAX_CHARS)
    })
}

#[cfg(test)]
mod tests;
