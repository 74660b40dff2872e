use serde::{Deserialize, Serialize};

/// The single record a jailer reports for a job.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Outcome {
    pub status: Status,
    /// Exit code of python when it exited on its own.
    pub exit_code: Option<i32>,
    /// Signal that ended python, if any.
    pub signal: Option<i32>,
    pub wall_ms: u64,
    pub cpu_ms: u64,
    pub memory_peak_bytes: Option<u64>,
    pub oom_killed: bool,
    /// `wall` or `cpu` when `status` is `timeout`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub setup_error: Option<SetupError>,
    /// Which mechanism enforced each limit on this host.
    pub enforced: Enforced,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// python exited with code 0.
    Ok,
    /// python exited with a non-zero code.
    Exit,
    /// python was killed by a signal other than a limit.
    Signal,
    /// The code raised an exception in a live interpreter, which lives on.
    Error,
    /// The wall or CPU time limit ended the run.
    Timeout,
    /// The memory limit ended the run.
    Oom,
    /// The server stopped while the call ran: its cell was interrupted
    /// (as at a time limit), and the session's variables were saved for
    /// the server's next start. Never a jail's own outcome.
    Stopped,
    /// The jail could not be built; nothing ran.
    #[default]
    SetupError,
}

/// A failed setup step: what failed, the errno, and what to do about it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SetupError {
    pub step: String,
    pub errno: Option<i32>,
    pub message: String,
}

impl std::fmt::Display for SetupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.step, self.message)
    }
}

/// How a limit or a layer was enforced.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum Enforcement {
    Cgroup,
    Rlimit,
    /// The jailer's own timer and a kill of the pid namespace.
    Timer,
    Full,
    Partial,
    #[default]
    None,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct Enforced {
    pub memory: Enforcement,
    pub pids: Enforcement,
    pub cpu_time: Enforcement,
    pub wall_time: Enforcement,
    pub landlock: Enforcement,
    /// The Landlock ABI the kernel offered (0 when absent).
    pub landlock_abi: u32,
    pub seccomp: Enforcement,
    /// `v1`, `v2` or `none`.
    pub cgroup: String,
}
