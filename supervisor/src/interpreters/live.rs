//! One running interpreter: its jail, the agent's channel, the output
//! pumps, python's pidfd and the job cgroup. It belongs to one session (or
//! waits in the pool for one) for its whole life.

use super::channel::{AgentWriter, ChannelError, FromAgent, Named, ToAgent};
use super::pumps::Pump;
use crate::envs::EnvLease;
use crate::job::JailKiller;
use prims_cgroup::JobCgroup;
use prims_protocol::jail::{Enforced, Outcome};
use std::os::fd::OwnedFd;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// How long a save or restore of globals may take inside the jail.
const STATE_DEADLINE: Duration = Duration::from_secs(30);
/// Where the agent saves globals, inside the jail.
pub(super) const STATE_FILE: &str = "/workspace/.prims/state.pickle";

#[derive(Debug)]
pub(crate) struct Live {
    /// The environment it runs in (its cache key), and the lease that keeps
    /// it from being collected meanwhile.
    pub env_key: String,
    pub _lease: Option<EnvLease>,
    /// Memory and process limits of its cgroup, for its whole life.
    pub held: HeldLimits,
    pub kill: JailKiller,
    /// The jailer's outcome, once it exited.
    pub exit: oneshot::Receiver<Outcome>,
    pub writer: AgentWriter,
    pub rx: mpsc::Receiver<Result<FromAgent, ChannelError>>,
    pub(super) stdout: Pump,
    pub(super) stderr: Pump,
    /// python, pid 2 of the jail: where interrupts go.
    pub python: OwnedFd,
    pub cgroup: Option<Box<dyn JobCgroup>>,
    pub enforced: Enforced,
    /// Cells run so far; 0 means no user code ever ran in it.
    pub cells: u64,
    /// It came from the warm pool.
    pub warm: bool,
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
pub(super) struct Carried {
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

    /// Asks the agent to pickle its globals into the workspace; the caller
    /// kills the jail afterwards either way.
    pub(super) async fn save(&mut self) -> Result<Carried, String> {
        let path = STATE_FILE.to_string();
        match self.ask(ToAgent::Save { path }).await? {
            FromAgent::Saved { saved, skipped } => Ok(Carried {
                names: saved,
                missed: skipped,
            }),
            other => Err(format!("unexpected answer to save: {}", other.op())),
        }
    }

    /// Asks the agent to load what a stopped interpreter saved.
    pub(super) async fn restore(&mut self) -> Result<Carried, String> {
        let path = STATE_FILE.to_string();
        match self.ask(ToAgent::Restore { path }).await? {
            FromAgent::Restored { restored, failed } => Ok(Carried {
                names: restored,
                missed: failed,
            }),
            other => Err(format!("unexpected answer to restore: {}", other.op())),
        }
    }

    async fn ask(&mut self, msg: ToAgent) -> Result<FromAgent, String> {
        self.writer.send(&msg).await.map_err(|e| e.to_string())?;
        match tokio::time::timeout(STATE_DEADLINE, self.rx.recv()).await {
            Err(_) => Err(format!("no answer within {} s", STATE_DEADLINE.as_secs())),
            Ok(None) => Err("the interpreter ended".into()),
            Ok(Some(Err(e))) => Err(e.to_string()),
            Ok(Some(Ok(m))) => Ok(m),
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        // A dropped interpreter never lingers: its jail goes with it.
        self.kill.kill();
    }
}
