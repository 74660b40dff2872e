//! The supervisor socket's messages. Each frame is a 4-byte big-endian
//! length and a JSON document. A connection starts with `Hello`/`Welcome`;
//! then the client sends `Request`s and the server answers each with any
//! number of `Event`s and exactly one final `Reply`, all tagged with the
//! request's id, so requests on one connection run concurrently.

pub use crate::cell::{CellOutput, NotRestored, OutputKind, ResetReason};
use crate::jail::{LimitRequest, Outcome};
use serde::{Deserialize, Serialize};

/// Bumped on any incompatible change to these types. 2: `write_mount`
/// carries a [`MountSize`] (an upload may be open-ended) and `mount_end`;
/// every request that names a session names its tenant. 3: runs go to the
/// session's live interpreter: `fresh`, and the reply's [`Interpreter`].
/// 4: runs as tasks (`start_task`, `get_task`, `cancel_task`).
/// 5: `Drain` and `Stats::draining`, `ErrorCode::Draining`.
/// 6: `History`, a session's runs for its notebook. 7: the outcome status
/// `Stopped` and `ErrorCode::Stopping`, a graceful stop's answers.
pub const PROTOCOL_VERSION: u32 = 7;
/// Largest frame either side accepts; bigger ones close the connection.
pub const MAX_FRAME_BYTES: usize = 8 * 1024 * 1024;
/// Largest chunk of file data in one frame.
pub const MAX_CHUNK_BYTES: usize = 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub struct Hello {
    pub protocol: u32,
    /// Free text naming the client, for logs.
    pub client: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub struct Welcome {
    pub protocol: u32,
    pub server: String,
}

/// Client to server, after the handshake.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub struct Request {
    /// Chosen by the client, unique among its requests in flight.
    pub id: u64,
    pub body: RequestBody,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op", deny_unknown_fields)]
/// Every request that names a session also names the tenant it acts for
/// (none without bearer tokens). The supervisor checks it against the
/// tenant that opened the session, and answers `not_found` on a mismatch,
/// exactly as for a session that does not exist.
pub enum RequestBody {
    OpenSession {
        #[serde(default)]
        tenant: Option<String>,
    },
    CloseSession {
        session_id: String,
        #[serde(default)]
        tenant: Option<String>,
    },
    SessionInfo {
        session_id: String,
        #[serde(default)]
        tenant: Option<String>,
    },
    Run(RunRequest),
    /// Cancel the request `target` of this connection.
    Cancel {
        target: u64,
    },
    ListDir {
        session_id: String,
        #[serde(default)]
        tenant: Option<String>,
        /// Relative to the workspace root.
        path: String,
    },
    ReadFile {
        session_id: String,
        #[serde(default)]
        tenant: Option<String>,
        path: String,
        #[serde(default)]
        offset: u64,
        limit: u64,
    },
    /// Start writing `mounts/<path>`; the data follows as `MountChunk`
    /// requests naming this request's id as their target.
    WriteMount {
        session_id: String,
        #[serde(default)]
        tenant: Option<String>,
        /// Relative to `mounts/`.
        path: String,
        size: MountSize,
    },
    /// A piece of a `WriteMount` in flight, identified by its request id.
    MountChunk {
        target: u64,
        #[serde(with = "crate::b64")]
        data: Vec<u8>,
    },
    /// The last chunk of a `WriteMount` of [`MountSize::AtMost`] was sent:
    /// the file is complete. An open-ended upload that stops without this
    /// (cancel, disconnect) is discarded, never kept short.
    MountEnd {
        target: u64,
    },
    Stats,
    /// Take no new sessions from now on (root only); the reply is `Stats`.
    /// The node drains for a restart: its sessions and runs go on.
    Drain,
    /// Start `run` detached from this connection and answer at once with
    /// the task; its result is kept for `ttl_ms` (capped by the server).
    StartTask {
        run: RunRequest,
        #[serde(default)]
        ttl_ms: Option<u64>,
    },
    GetTask {
        task_id: String,
        #[serde(default)]
        tenant: Option<String>,
    },
    /// Kill the task's run, if it is still working.
    CancelTask {
        task_id: String,
        #[serde(default)]
        tenant: Option<String>,
    },
    /// A page of the session's recorded runs, from run number `from`.
    History {
        session_id: String,
        #[serde(default)]
        tenant: Option<String>,
        #[serde(default)]
        from: u64,
    },
    /// `count` new sessions, each with a copy of the session's files and
    /// globals (see [`crate::branch`]); the reply is `Forked`.
    ForkSession {
        session_id: String,
        #[serde(default)]
        tenant: Option<String>,
        count: u32,
    },
    /// Saves the session's globals and files; the reply is `Checkpoint`.
    Checkpoint {
        session_id: String,
        #[serde(default)]
        tenant: Option<String>,
        #[serde(default)]
        label: Option<String>,
    },
    /// Rolls the session's globals and files back to a checkpoint; the
    /// reply is `RolledBack`.
    RestoreCheckpoint {
        session_id: String,
        #[serde(default)]
        tenant: Option<String>,
        checkpoint_id: String,
    },
    /// The session's checkpoints, oldest first; the reply is `Checkpoints`.
    ListCheckpoints {
        session_id: String,
        #[serde(default)]
        tenant: Option<String>,
    },
}

/// How many bytes a `WriteMount` brings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum MountSize {
    /// The chunks add up to exactly this; the upload ends with the last byte.
    Exact(u64),
    /// Unknown in advance (a download without Content-Length): at most this
    /// many bytes, ended by `MountEnd`.
    AtMost(u64),
}

impl MountSize {
    /// The most bytes the chunks may add up to.
    pub fn limit(self) -> u64 {
        match self {
            MountSize::Exact(n) | MountSize::AtMost(n) => n,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub struct RunRequest {
    pub session_id: String,
    #[serde(default)]
    pub tenant: Option<String>,
    pub code: String,
    #[serde(default)]
    pub requirements: Vec<String>,
    #[serde(default)]
    pub limits: LimitRequest,
    /// Replace the session's interpreter before this run, dropping its state.
    #[serde(default)]
    pub fresh: bool,
    /// In `network.mode = "allowlist"`: narrow this run's allow-list to
    /// these entries (never widen it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<Vec<String>>,
}

/// Server to client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub struct Response {
    /// The request this answers; 0 for connection-level errors.
    pub id: u64,
    pub body: ResponseBody,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", deny_unknown_fields)]
// Each response is built, encoded and dropped; boxing the big reply buys nothing.
#[allow(clippy::large_enum_variant)]
pub enum ResponseBody {
    /// Something happened while the request runs; more frames follow.
    Event(Event),
    /// The request succeeded; nothing more follows for this id.
    Reply(Reply),
    /// The request failed; nothing more follows for this id.
    Error(ErrorReply),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "event", deny_unknown_fields)]
pub enum Event {
    /// Waiting for a free run slot: `position` runs are ahead.
    Queued { position: u32 },
    /// An environment is being built (or waited for).
    Building { message: String },
    /// The jail started.
    Started,
    Output {
        stream: OutputStream,
        #[serde(with = "crate::b64")]
        data: Vec<u8>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputStream {
    Stdout,
    Stderr,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "reply", deny_unknown_fields)]
// Each reply is built, encoded and dropped; boxing the run reply buys nothing.
#[allow(clippy::large_enum_variant)]
pub enum Reply {
    Session(SessionInfo),
    Closed,
    Run(RunReply),
    Cancelled,
    Dir {
        entries: Vec<DirEntry>,
    },
    File(FileData),
    Mounted {
        path: String,
        bytes: u64,
    },
    Stats(Stats),
    Task(TaskInfo),
    History(crate::history::HistoryPage),
    Forked(crate::branch::ForkReply),
    Checkpoint(crate::branch::CheckpointInfo),
    RolledBack(crate::branch::RestoreReply),
    Checkpoints {
        checkpoints: Vec<crate::branch::CheckpointInfo>,
    },
}

/// A session id: exactly 32 lowercase hex characters (128 bits, or in a
/// cluster a node's 16 and 112 random ones; see [`crate::node`]).
pub fn is_session_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub struct SessionInfo {
    pub session_id: String,
    pub tenant: Option<String>,
    /// Unix seconds.
    pub created: u64,
    pub last_used: u64,
    pub disk_used_bytes: u64,
    pub disk_quota_bytes: u64,
    /// How the last run ended, if it was cut short by a supervisor restart.
    #[serde(default)]
    pub last_run_lost: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub struct RunReply {
    pub outcome: Outcome,
    /// Everything kept of stdout and stderr (also streamed as `Output` events).
    #[serde(with = "crate::b64")]
    pub stdout: Vec<u8>,
    #[serde(with = "crate::b64")]
    pub stderr: Vec<u8>,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    /// Every file under `output/` after the run.
    pub files: Vec<OutputFile>,
    /// True when this run built its environment (false when it was cached).
    pub env_built: bool,
    /// The live interpreter the code ran in.
    pub interpreter: Interpreter,
    /// In allowlist mode: what the code reached and what was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<crate::egress::NetworkReport>,
    /// The cell's rich outputs, in order: its `display()`s and its last
    /// expression's value, as IPython formats them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<CellOutput>,
    /// Outputs left out past the limits of one call.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub outputs_dropped: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// What happened to the session's interpreter for one run, and the value
/// of the code's last expression.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub struct Interpreter {
    pub state: InterpreterState,
    /// Why the interpreter is not the one the previous run used; absent
    /// when `state` is `kept`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<ResetReason>,
    /// It came from the warm pool, its imports already done.
    #[serde(default)]
    pub warm: bool,
    /// `repr()` of the last expression's value, when the code ends with an
    /// expression whose value is not None.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    #[serde(default)]
    pub result_truncated: bool,
    /// Globals saved when the previous interpreter was stopped while idle
    /// or for room, and restored into this one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restored: Vec<String>,
    /// Saved globals that could not be saved or restored, with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_restored: Vec<NotRestored>,
    /// Why, in words, when the reason needs them (the package and both
    /// versions of a `requirements_conflict`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason_message: Option<String>,
    /// Distributions (`name==version`) this run installed into the
    /// session, its interpreter kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub installed: Vec<String>,
    /// When the globals in `restored` were saved (Unix seconds): at a
    /// graceful stop, an idle stop, or the last autosave before a crash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved_at: Option<u64>,
    /// The session's last call before the server went down never ended
    /// (a crash, or a stop that could not answer it): its effects on the
    /// workspace may be there, its variables are not.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub last_run_lost: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InterpreterState {
    /// The interpreter of the previous run: its variables and imports remain.
    Kept,
    /// The session's first interpreter.
    New,
    /// A new interpreter replaced one whose state is gone (see `reason`).
    Reset,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub struct OutputFile {
    /// Relative to `output/`.
    pub path: String,
    pub size: u64,
    pub mime: String,
    /// Created or modified by this run.
    pub changed: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub struct DirEntry {
    pub name: String,
    /// Relative to the workspace root.
    pub path: String,
    #[serde(rename = "type")]
    pub kind: EntryKind,
    pub size: u64,
    /// Unix seconds.
    pub modified: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    File,
    Directory,
    Symlink,
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub struct FileData {
    #[serde(with = "crate::b64")]
    pub data: Vec<u8>,
    /// Size of the whole file.
    pub size: u64,
    pub eof: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub struct Stats {
    pub sessions: u64,
    pub runs_active: u64,
    pub runs_queued: u64,
    pub runs_total: u64,
    pub envs: u64,
    pub env_builds: u64,
    pub base_env_ready: bool,
    /// What a new session's first call needs is up (the base environment,
    /// the IPython layer and the default environment's fork template), or
    /// the start-up's bound passed.
    #[serde(default)]
    pub ready: bool,
    /// What the start-up still waits for, in words.
    #[serde(default)]
    pub waiting_for: Vec<String>,
    /// What failed as the server started, in words: it serves without it.
    #[serde(default)]
    pub degraded: Vec<String>,
    /// Interpreters that belong to a session.
    #[serde(default)]
    pub interpreters_live: u64,
    /// Memory those hold, as their cgroups count it.
    #[serde(default)]
    pub interpreters_memory_bytes: u64,
    /// Warm sessions ready in the pool, and the memory they hold.
    #[serde(default)]
    pub pool_ready: u64,
    #[serde(default)]
    pub pool_memory_bytes: u64,
    /// Fork templates up, and interpreters started by forking one or cold
    /// since the supervisor started.
    #[serde(default)]
    pub templates_up: u64,
    #[serde(default)]
    pub starts_forked: u64,
    #[serde(default)]
    pub starts_cold: u64,
    /// Fresh pythons forked in place, in their forked interpreter's jail.
    #[serde(default)]
    pub starts_in_place: u64,
    /// Connections the egress proxy let through, and refused or cut.
    #[serde(default)]
    pub egress_allowed: u64,
    #[serde(default)]
    pub egress_denied: u64,
    /// Runs as tasks still working, and tasks kept (working or finished).
    #[serde(default)]
    pub tasks_working: u64,
    #[serde(default)]
    pub tasks_kept: u64,
    /// A `Drain` came: no new sessions.
    #[serde(default)]
    pub draining: bool,
    /// Background saves of sessions' globals since the supervisor started,
    /// and the CPU their jails spent on them, as their cgroups count it.
    #[serde(default)]
    pub autosaves: u64,
    #[serde(default)]
    pub autosave_cpu_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub struct ErrorReply {
    pub code: ErrorCode,
    /// For a person or a model to act on.
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// Malformed or unacceptable request.
    BadRequest,
    NotFound,
    /// Too many runs queued: retry later.
    Busy,
    /// The session's disk quota, or a size cap, was hit.
    Quota,
    /// Path escapes the workspace, or a symlink was refused.
    Forbidden,
    Cancelled,
    /// An environment could not be built (`pip install failed: …`).
    Environment,
    Internal,
    /// The node is draining and opens no new session: ask another node.
    Draining,
    /// The server is stopping: the request was not started. The session
    /// (its files, and its variables as saved at the stop) is there after
    /// the server's next start.
    Stopping,
}

// Runs detached from the connection that started them (MCP tasks): the
// supervisor owns them, so they outlive the front-end's connection, and
// the front-end itself.

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Working,
    /// The run ended; `result` or `error` says how.
    Completed,
    /// Cancelled by `CancelTask` (or by a supervisor shutdown).
    Cancelled,
    /// The result was dropped to keep its tenant's task results within their
    /// memory budget.
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
