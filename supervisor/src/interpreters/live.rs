//! One running interpreter: its jail, the agent's channel, the output
//! pumps, python's pidfd and the job cgroup. It belongs to one session (or
//! waits in the pool for one) for its whole life.

use super::channel::{AgentWriter, ChannelError, FromAgent, Named, ToAgent};
use super::pumps::Pump;
use super::settled::MainThread;
use crate::envs::EnvLease;
use crate::job::JailKiller;
use prims_cgroup::JobCgroup;
use prims_protocol::jail::{Enforced, Outcome};
use std::os::fd::OwnedFd;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// How long a restore of globals may take inside the jail (the session's
/// own call waits for it; a save's deadline is the policy's).
const RESTORE_DEADLINE: Duration = Duration::from_secs(30);
/// `python.warm_up_code` runs at idle CPU priority, on a busy host too.
const WARM_UP_DEADLINE: Duration = Duration::from_secs(120);
/// Where the agent saves globals, inside the jail.
pub(super) const STATE_FILE: &str = "/workspace/.prims/state.pickle";

#[derive(Debug)]
pub(crate) struct Live {
    /// The environment it runs in (its cache key), and the lease that keeps
    /// it from being collected meanwhile.
    pub env_key: String,
    pub _lease: Option<EnvLease>,
    /// The IPython layer it sees, kept (a built one's lease) for its life.
    pub _ipython: Option<super::ipython::IpythonLayer>,
    /// Memory and process limits of its cgroup, for its whole life.
    pub held: HeldLimits,
    /// What the call that started it asked for (a branch starts with the
    /// same, so that its calls keep it).
    pub asked: prims_protocol::jail::LimitRequest,
    pub kill: JailKiller,
    /// The jailer's outcome, once it exited.
    pub exit: oneshot::Receiver<Outcome>,
    pub writer: AgentWriter,
    pub rx: mpsc::Receiver<Result<FromAgent, ChannelError>>,
    pub(super) stdout: Pump,
    pub(super) stderr: Pump,
    /// python, pid 2 of the jail: where interrupts go.
    pub python: OwnedFd,
    /// Its main thread, which shows when a cell has really ended.
    pub main: MainThread,
    pub cgroup: Option<Box<dyn JobCgroup>>,
    pub enforced: Enforced,
    /// Cells run so far; 0 means no user code ever ran in it.
    pub cells: u64,
    /// The secrets' placeholders its environment holds (name, value).
    pub secret_env: Vec<(String, String)>,
    /// It came from the warm pool.
    pub warm: bool,
    /// It runs at batch CPU weight: a `fresh: true` call started it.
    pub batch: bool,
    /// It was forked from a template (not started cold).
    pub forked: bool,
    /// Asks its parent for a fresh python in the same jail (forked only).
    pub parent: Option<super::fork::parent::Parent>,
    pub job: String,
    /// Its jail's listener, served by the egress proxy (allowlist mode).
    pub egress: Option<crate::egress::Attached>,
}

/// The limits an interpreter's cgroup holds for its whole life; a call
/// that asks for others gets a new interpreter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HeldLimits {
    pub memory_bytes: u64,
    pub pids: u64,
}

impl From<&prims_protocol::jail::JobLimits> for HeldLimits {
    fn from(l: &prims_protocol::jail::JobLimits) -> Self {
        HeldLimits {
            memory_bytes: l.memory_bytes,
            pids: l.pids,
        }
    }
}

/// Globals carried over a stop: what was saved, or restored, and what not.
#[derive(Debug, Default, Clone)]
pub(crate) struct Carried {
    pub names: Vec<String>,
    pub missed: Vec<Named>,
}

impl Live {
    /// Kills the jail: the jailer dies, and the init's parent-death signal
    /// takes every process of the jail with it.
    pub fn kill(&self) {
        self.kill.kill();
    }

    /// Kills the jail and waits, at most `within`, until its jailer is
    /// reaped (and with it the job cgroup removed): for a caller that is
    /// about to exit and must leave nothing behind.
    pub async fn end(mut self, within: Duration) {
        self.kill.kill();
        // A cell that saw python die has already taken the jailer's outcome.
        if self.exit.is_terminated() {
            return;
        }
        if tokio::time::timeout(within, &mut self.exit).await.is_err() {
            tracing::warn!(job = %self.job, "an interpreter's jailer was not reaped in time");
        }
    }

    /// Its jail has not ended.
    pub fn is_alive(&mut self) -> bool {
        matches!(
            self.exit.try_recv(),
            Err(oneshot::error::TryRecvError::Empty)
        )
    }

    /// Memory the job holds now, as its cgroup counts it.
    pub fn memory_bytes(&self) -> Option<u64> {
        self.cgroup
            .as_ref()
            .and_then(|c| c.usage().ok())
            .and_then(|u| u.memory_current_bytes)
    }

    /// Asks the agent to pickle its globals into the workspace, within
    /// `deadline`; the caller kills the jail afterwards either way.
    pub(super) async fn save(&mut self, deadline: Duration) -> Result<Carried, AskError> {
        self.save_to(STATE_FILE, (true, false), deadline).await
    }

    /// Asks the agent to pickle its globals into `path` (inside the jail),
    /// synced to disk when `durable`, each value loaded again on trial when
    /// `check`, within `deadline`.
    pub(super) async fn save_to(
        &mut self,
        path: &str,
        (durable, check): (bool, bool),
        deadline: Duration,
    ) -> Result<Carried, AskError> {
        let msg = ToAgent::Save {
            path: path.into(),
            durable,
            check,
        };
        match self.ask(msg, deadline).await? {
            FromAgent::Saved { saved, skipped } => Ok(Carried {
                names: saved,
                missed: skipped,
            }),
            FromAgent::Error { message } => Err(AskError::Refused(message)),
            other => Err(AskError::Unexpected(other.op())),
        }
    }

    /// Asks the agent to load what a stopped interpreter saved.
    pub(super) async fn restore(&mut self) -> Result<Carried, AskError> {
        let path = STATE_FILE.to_string();
        match self
            .ask(ToAgent::Restore { path }, RESTORE_DEADLINE)
            .await?
        {
            FromAgent::Restored { restored, failed } => Ok(Carried {
                names: restored,
                missed: failed,
            }),
            other => Err(AskError::Unexpected(other.op())),
        }
    }

    /// Asks the agent to delete what a stopped interpreter saved, unread.
    pub(super) async fn discard(&mut self) -> Result<(), AskError> {
        let path = STATE_FILE.to_string();
        match self
            .ask(ToAgent::Discard { path }, RESTORE_DEADLINE)
            .await?
        {
            FromAgent::Discarded {} => Ok(()),
            other => Err(AskError::Unexpected(other.op())),
        }
    }

    /// Makes the session's environment hold `env` (its secrets'
    /// placeholders) and nothing of what it held before.
    pub(super) async fn set_secret_env(
        &mut self,
        env: &[(String, String)],
    ) -> Result<(), AskError> {
        if self.secret_env == env {
            return Ok(());
        }
        let unset = self
            .secret_env
            .iter()
            .filter(|(k, _)| !env.iter().any(|(n, _)| n == k))
            .map(|(k, _)| k.clone())
            .collect();
        let msg = ToAgent::Environ {
            set: env.iter().cloned().collect(),
            unset,
        };
        match self.ask(msg, RESTORE_DEADLINE).await? {
            FromAgent::EnvironSet {} => {
                self.secret_env = env.to_vec();
                Ok(())
            }
            FromAgent::Error { message } => Err(AskError::Refused(message)),
            other => Err(AskError::Unexpected(other.op())),
        }
    }

    /// Asks a pool spare's agent to run IPython's lazy first-cell set-up
    /// and `code` now, while it waits, rather than in the session's first
    /// call. `Ok(Some(why))`: the code raised, and the spare serves anyway.
    pub(super) async fn warm_up(&mut self, code: &str) -> Result<Option<String>, AskError> {
        let msg = ToAgent::WarmUp { code: code.into() };
        match self.ask(msg, WARM_UP_DEADLINE).await? {
            FromAgent::WarmedUp { error } => Ok(error),
            other => Err(AskError::Unexpected(other.op())),
        }
    }

    async fn ask(&mut self, msg: ToAgent, deadline: Duration) -> Result<FromAgent, AskError> {
        self.writer.send(&msg).await.map_err(AskError::Channel)?;
        match tokio::time::timeout(deadline, self.rx.recv()).await {
            Err(_) => Err(AskError::Timeout(deadline)),
            Ok(None) => Err(AskError::Ended),
            Ok(Some(Err(e))) => Err(AskError::Channel(e)),
            Ok(Some(Ok(m))) => Ok(m),
        }
    }
}

/// Why the agent gave no answer to a save, restore or discard.
#[derive(Debug, thiserror::Error)]
pub(super) enum AskError {
    #[error("no answer within {}", seconds(*.0))]
    Timeout(Duration),
    #[error("the interpreter ended")]
    Ended,
    #[error(transparent)]
    Channel(ChannelError),
    #[error("an answer of the wrong kind ({0})")]
    Unexpected(&'static str),
    /// The agent answered, in turn, that it could not (a full workspace).
    #[error("{0}")]
    Refused(String),
}

/// `d` as people write it: "10 s", "500 ms".
fn seconds(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        // A dropped interpreter never lingers: its jail goes with it.
        self.kill.kill();
    }
}
