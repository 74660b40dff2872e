//! The daemon's state, shared by every request: the policy in force and
//! the parts that sessions, environments, runs and tasks are kept in.

use super::ready::Readiness;
use super::replies::internal;
use super::scheduler::Scheduler;
use crate::audit::Audit;
use crate::envs::Envs;
use crate::interpreters::Interpreters;
use crate::sessions::SessionStore;
use prims_policy::Policy;
use prims_protocol::wire::{ErrorReply, Stats};
use std::sync::{Arc, RwLock};

/// Beyond the interrupt's grace, what a stop waits for running calls'
/// answers: a cell killed at the end of its grace still has its output to
/// drain and its answer to make.
const STOP_MARGIN: std::time::Duration = std::time::Duration::from_secs(3);

pub struct Daemon {
    pub(super) policy: RwLock<Arc<Policy>>,
    /// Whether what a first call needs is up (the start-up's report).
    pub(super) readiness: Arc<Readiness>,
    pub(super) sessions: Arc<SessionStore>,
    pub(super) envs: Arc<Envs>,
    pub(super) scheduler: Scheduler,
    pub(super) interpreters: Arc<Interpreters>,
    pub(super) audit: Arc<Audit>,
    pub(super) tasks: crate::tasks::Tasks,
    /// Sessions' checkpoints, on disk.
    pub(super) checkpoints: Arc<crate::checkpoints::Checkpoints>,
    /// Egress decisions since start: connections allowed, and refused.
    pub(super) egress_allowed: std::sync::atomic::AtomicU64,
    pub(super) egress_denied: std::sync::atomic::AtomicU64,
    /// Set by `Drain`: no new sessions, for good (a restart clears it).
    pub(super) draining: std::sync::atomic::AtomicBool,
    /// Cancelled when the server starts to stop ([`Daemon::stop_calls`]).
    pub(super) stopping: tokio_util::sync::CancellationToken,
    /// `run` requests being answered: a stop waits for their answers.
    pub(super) runs_in_flight: std::sync::atomic::AtomicUsize,
}

impl Daemon {
    pub(super) fn policy(&self) -> Arc<Policy> {
        self.policy
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Run a blocking store or filesystem call off the async threads.
    pub(super) async fn blocking<T, F>(&self, f: F) -> Result<T, ErrorReply>
    where
        F: FnOnce() -> Result<T, ErrorReply> + Send + 'static,
        T: Send + 'static,
    {
        tokio::task::spawn_blocking(f)
            .await
            .map_err(|e| internal(format!("worker failed: {e}")))?
    }

    /// The live session `id` of `tenant`.
    pub(super) async fn session(
        &self,
        id: String,
        tenant: Option<String>,
    ) -> Result<Arc<crate::sessions::Session>, ErrorReply> {
        let sessions = self.sessions.clone();
        self.blocking(move || {
            sessions
                .get(&id, tenant.as_deref())
                .map_err(|e| e.to_reply())
        })
        .await
    }

    /// Ends session `id`; only its tenant may. It is gone for every
    /// request at once; its checkpoints go, and its interpreter, then its
    /// files, after the answer, so that a client never waits for a jail to
    /// end (a restart's sweep finishes a close cut short).
    pub(super) async fn close(&self, id: String, tenant: Option<String>) -> Result<(), ErrorReply> {
        let (sessions, live, checkpoints) = (
            self.sessions.clone(),
            self.interpreters.clone(),
            self.checkpoints.clone(),
        );
        self.blocking(move || {
            let s = sessions
                .begin_closing(&id, tenant.as_deref())
                .map_err(|e| e.to_reply())?;
            checkpoints.remove_session(&s.name);
            let ended = live.forget(&s.name);
            sessions.finish_closing(s, move || {
                if let Some(end) = ended {
                    let _ = end.blocking_recv();
                }
            });
            Ok(())
        })
        .await
    }

    /// The first step of a graceful stop: from now on no call starts (each
    /// is answered `Stopping`), and every running cell is interrupted as at
    /// a time limit, so that its call is answered with status `stopped`
    /// and its interpreter lives to have its variables saved. Returns once
    /// every `run` request has its answer, or after the interrupts' grace
    /// and a margin (a cell that ignores its interrupt is killed by then).
    pub(super) async fn stop_calls(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        self.stopping.cancel();
        let grace = self.policy().interpreters.interrupt_grace.0 + STOP_MARGIN;
        let deadline = std::time::Instant::now() + grace;
        while self.runs_in_flight.load(Relaxed) > 0 && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let left = self.runs_in_flight.load(Relaxed);
        if left > 0 {
            tracing::warn!(left, "calls still unanswered when the server stopped");
        }
    }

    /// Put a new policy in force for runs and tasks that start from now on;
    /// runs already going keep the spec they were built with. The identity range,
    /// cgroup parent and interpreter are fixed at start-up.
    pub fn reload(&self, policy: Policy) {
        let old = self.policy();
        if old.identity != policy.identity || old.cgroup != policy.cgroup {
            tracing::warn!("[identity] and [cgroup] changes take effect after a restart");
        }
        self.sessions
            .update_policy(&crate::sessions::SessionPolicy::from(&policy));
        self.envs.update_policy(&policy);
        self.tasks
            .set_limits(crate::tasks::TaskLimits::from(&policy.tasks));
        *self.policy.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(policy);
        // The pool's spares were started under the old policy (its network
        // mode, limits, prewarm set): none is handed out, and the pool
        // refills under the new one now.
        self.interpreters.policy_changed();
        tracing::info!("policy reloaded");
    }

    pub(super) fn stats(&self) -> Stats {
        let env = self.envs.stats();
        let live = self.interpreters.stats();
        let templates = self.interpreters.template_stats();
        let (tasks_working, tasks_kept) = self.tasks.counts();
        let ready = self.readiness.report();
        Stats {
            ready: ready.ready,
            waiting_for: ready.waiting_for,
            degraded: ready.degraded,
            draining: self.draining.load(std::sync::atomic::Ordering::Relaxed),
            tasks_working,
            tasks_kept,
            egress_allowed: self
                .egress_allowed
                .load(std::sync::atomic::Ordering::Relaxed),
            egress_denied: self
                .egress_denied
                .load(std::sync::atomic::Ordering::Relaxed),
            interpreters_live: live.live,
            interpreters_memory_bytes: live.memory_bytes,
            pool_ready: live.pool_ready,
            pool_memory_bytes: live.pool_memory_bytes,
            templates_up: templates.up,
            starts_forked: templates.forked_starts,
            starts_cold: templates.cold_starts,
            starts_in_place: templates.in_place_starts,
            autosaves: live.autosaves,
            autosave_cpu_ms: live.autosave_cpu_ms,
            sessions: self.sessions.len() as u64,
            runs_active: self.scheduler.active(),
            runs_queued: self.scheduler.queued(),
            runs_total: self.scheduler.total(),
            envs: env.envs,
            env_builds: env.builds,
            base_env_ready: self.envs.base_ready(),
        }
    }
}
