//! Every live interpreter, by session: which call gets which interpreter,
//! the caps on how many live (least recently used stopped first), the idle
//! stop, and the warm pool that new sessions take from.

use super::agent::AgentDir;
use super::fork::templates::{Home, Parts, TemplateStats, Templates};
use super::ipython::IpythonLayer;
use super::live::{Carried, Live};
use super::pool::{Pool, Warm};
use super::slot::{Carry, SessionRequirements, Slot};
use super::start::{self, StartSpec};
use crate::egress::EgressProxy;
use crate::envs::{EnvLease, Envs};
use crate::job::Jails;
use crate::sessions::{Session, SessionStore};
use prims_policy::Policy;
use prims_protocol::jail::Outcome;
use prims_protocol::wire::{ResetReason, SessionInfo};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// How long a refill waits after a spare is taken: a new session's first
/// call usually follows at once, and should not share the CPU with the
/// refill's workspace image, jailer and fork.
const REFILL_DELAY: Duration = Duration::from_millis(250);

/// Live interpreters and the warm pool.
#[derive(Debug)]
pub struct Interpreters {
    pub(super) jails: Jails,
    /// Serves the jails of allowlist mode.
    pub(super) egress: Arc<EgressProxy>,
    /// The host python every environment points at.
    pub(super) interpreter: PathBuf,
    slots: Mutex<HashMap<String, Arc<Slot>>>,
    pool: Pool,
    /// Fork templates, per environment (`interpreters.fork_templates`), and
    /// the count of starts by path.
    pub(super) templates: Arc<Templates>,
    /// The agent's files, which every interpreter runs.
    pub(super) agent: AgentDir,
    /// Where every save of a session's globals is recorded, for a restart.
    pub(super) sessions: Arc<SessionStore>,
    /// Cancelled when the server starts to stop: every running cell is
    /// interrupted, as at a time limit, and its call answered so.
    pub(super) stopping: CancellationToken,
    /// Background saves, and the CPU they cost (`autosave`).
    pub(super) autosaved: Arc<super::saves::Tally>,
}

/// What `Interpreters::stats` reports.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct InterpreterStats {
    pub live: u64,
    pub memory_bytes: u64,
    pub pool_ready: u64,
    pub pool_memory_bytes: u64,
    pub autosaves: u64,
    pub autosave_cpu_ms: u64,
}

impl Interpreters {
    pub(crate) fn new(
        jails: Jails,
        egress: Arc<EgressProxy>,
        interpreter: PathBuf,
        sessions: Arc<crate::sessions::SessionStore>,
        agent: AgentDir,
        stopping: CancellationToken,
    ) -> Interpreters {
        Interpreters {
            stopping,
            autosaved: Default::default(),
            jails,
            egress,
            interpreter,
            slots: Mutex::default(),
            pool: Pool::default(),
            templates: Arc::new(Templates::new(Home::Store(sessions.clone()))),
            agent,
            sessions,
        }
    }

    fn slots(&self) -> MutexGuard<'_, HashMap<String, Arc<Slot>>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every slot with its session's name, taken out of the lock.
    pub(super) fn named_slots(&self) -> Vec<(String, Arc<Slot>)> {
        self.slots()
            .iter()
            .map(|(n, s)| (n.clone(), s.clone()))
            .collect()
    }

    /// The session's slot, made on its first call since the supervisor
    /// started. A session whose globals were saved before the restart (a
    /// graceful stop, an idle stop, an autosave before a crash) gets them
    /// back in its next interpreter, which reports the restart.
    pub(super) fn slot(&self, session: &Session) -> Arc<Slot> {
        // Under the lock: the record is taken once, by the slot that stays.
        let mut slots = self.slots();
        if let Some(s) = slots.get(&session.name) {
            return s.clone();
        }
        let slot = Slot::new(session.tenant.clone(), None);
        if let Some((unsaved, at)) = self.sessions.saved_globals(session) {
            let mut m = slot.meta();
            m.carry = Carry::Saved {
                unsaved: unsaved.into_iter().map(Into::into).collect(),
                at,
            };
            m.next_reason = Some(ResetReason::ServerRestarted);
        }
        let slot = Arc::new(slot);
        slots.insert(session.name.clone(), slot.clone());
        slot
    }

    /// What the session's calls asked for so far; None before its first.
    pub(crate) fn requirements(&self, session: &Session) -> Option<SessionRequirements> {
        self.slot(session).meta().requirements.clone()
    }

    /// Records what the session's calls asked for, after a call ran.
    pub(crate) fn set_requirements(&self, session: &Session, reqs: SessionRequirements) {
        self.slot(session).meta().requirements = Some(reqs);
    }

    /// A new session for `tenant`, taken from the warm pool when one is
    /// ready there: `None` when the pool is empty.
    pub(crate) fn claim(
        &self,
        sessions: &SessionStore,
        tenant: Option<String>,
        policy: &Arc<Policy>,
    ) -> Option<SessionInfo> {
        let (warm, gone) = self.pool.take(policy);
        for mut d in gone {
            if d.live.is_alive() {
                tracing::info!(job = %d.live.job, "a pooled interpreter predates the policy in force; discarding it");
                d.live.kill();
            } else {
                tracing::warn!(job = %d.live.job, "a pooled interpreter had died; discarding it");
            }
            sessions.discard(d.spare);
        }
        let Warm {
            spare, mut live, ..
        } = warm?;
        start::promote(&mut live);
        let name = spare.name().to_string();
        match sessions.adopt(spare, tenant.clone()) {
            Ok(info) => {
                self.slots()
                    .insert(name, Arc::new(Slot::new(tenant, Some(live))));
                Some(info)
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not hand out a pooled session");
                None
            }
        }
    }

    /// The session ends: its interpreter is killed at once and no longer
    /// counted. Returns, when it was idle, its jail's end to wait for
    /// before the workspace can be removed (a call running in it ends
    /// with it). Blocking: call it off the async threads.
    pub(crate) fn forget(&self, session: &str) -> Option<oneshot::Receiver<Outcome>> {
        let slot = self.slots().remove(session)?;
        if let Some(k) = slot.meta().kill.take() {
            k.kill();
        }
        let mut live = slot.live.try_lock().ok().and_then(|mut g| g.take())?;
        live.kill();
        Some(std::mem::replace(
            &mut live.exit,
            tokio::sync::oneshot::channel().1,
        ))
    }

    /// Stops interpreters unused for `ttl`; their saves (each within
    /// `save`) run concurrently, and nothing waits for them here.
    pub(crate) fn stop_idle(&self, ttl: Duration, save: Duration) {
        let now = Instant::now();
        let idle = self
            .named_slots()
            .into_iter()
            .filter(|(_, s)| s.is_live() && now.duration_since(s.meta().last_used) >= ttl);
        for (name, slot) in idle {
            self.stop(&name, &slot, ResetReason::StoppedIdle, save);
        }
    }

    /// Below the caps before a new interpreter starts for `me`: stops the
    /// least recently used idle ones (of the tenant first when the tenant
    /// is at its own cap). A busy interpreter is never stopped, so the cap
    /// can be passed while every one is running a call. It never waits for
    /// a stop's save, which runs the stopped session's own code: only that
    /// session's next call does.
    pub(super) fn make_room(&self, policy: &Policy, tenant: Option<&str>, me: &Arc<Slot>) {
        let cfg = &policy.interpreters;
        loop {
            let live: Vec<(String, Arc<Slot>)> = self
                .named_slots()
                .into_iter()
                .filter(|(_, s)| s.is_live() && !Arc::ptr_eq(s, me))
                .collect();
            let mine = live
                .iter()
                .filter(|(_, s)| s.tenant.as_deref() == tenant)
                .count();
            let over_tenant = mine >= cfg.max_live_per_tenant as usize;
            if live.len() < cfg.max_live as usize && !over_tenant {
                return;
            }
            let mut candidates: Vec<(Instant, String, Arc<Slot>)> = live
                .into_iter()
                .filter(|(_, s)| !over_tenant || s.tenant.as_deref() == tenant)
                .map(|(n, s)| {
                    let t = s.meta().last_used;
                    (t, n, s)
                })
                .collect();
            candidates.sort_by_key(|(t, _, _)| *t);
            let save = cfg.save_timeout.0;
            let stopped = candidates
                .iter()
                .any(|(_, name, slot)| self.stop(name, slot, ResetReason::StoppedForRoom, save));
            if !stopped {
                tracing::warn!(
                    "every live interpreter is busy; starting one past interpreters.max_live"
                );
                return;
            }
        }
    }

    /// The server stops gracefully: every idle interpreter saves its
    /// globals into its workspace as at an idle stop (side by side, each
    /// within `save`, each in its own jail), and its session records, for
    /// the next start, that its next interpreter restores them. So do
    /// sessions whose stop saved globals that no call restored yet. An
    /// interpreter busy with a call is not waited for: that call is lost.
    pub(crate) async fn save_all(&self, save: Duration) {
        let slots: Vec<(String, Arc<Slot>)> = self
            .slots()
            .iter()
            .map(|(n, s)| (n.clone(), s.clone()))
            .collect();
        let mut saves = Vec::new();
        for (name, slot) in slots {
            let Ok(mut guard) = slot.live.clone().try_lock_owned() else {
                continue;
            };
            if guard.is_none() {
                // Stopped while idle, and recorded then.
                continue;
            }
            saves.push(async move {
                let Some(live) = guard.as_mut().filter(|l| l.cells > 0) else {
                    return (name, None);
                };
                if !live.is_alive() {
                    return (name, None);
                }
                let saved = live.save(save).await;
                if let Err(e) = &saved {
                    tracing::warn!(job = %live.job, error = %e, "saving an interpreter's globals at shutdown failed");
                }
                (name, saved.ok().map(|c| c.missed))
            });
        }
        let started = Instant::now();
        let saved = futures::future::join_all(saves).await;
        let n = saved.iter().filter(|(_, s)| s.is_some()).count();
        tracing::info!(
            saved = n,
            of = saved.len(),
            ms = started.elapsed().as_millis() as u64,
            "globals of live interpreters saved for the restart"
        );
        let records = saved
            .into_iter()
            .filter_map(|(name, s)| s.map(|s| (name, s)));
        for (name, unsaved) in records {
            super::saves::record(&self.sessions, &name, unsaved).await;
        }
    }

    /// Kills every interpreter, and removes the pool's spare sessions.
    pub(crate) fn shutdown(&self, sessions: &SessionStore) {
        let slots: Vec<Arc<Slot>> = self.slots().drain().map(|(_, s)| s).collect();
        for s in slots {
            if let Some(k) = s.meta().kill.take() {
                k.kill();
            }
        }
        for w in self.pool.drain() {
            drop(w.live);
            sessions.discard(w.spare);
        }
    }

    /// Figures for `/metrics`.
    pub(crate) fn stats(&self) -> InterpreterStats {
        let slots: Vec<Arc<Slot>> = self.slots().values().cloned().collect();
        let mut st = InterpreterStats {
            pool_ready: self.pool.len() as u64,
            pool_memory_bytes: self.pool.memory_bytes(),
            autosaves: self
                .autosaved
                .saves
                .load(std::sync::atomic::Ordering::Relaxed),
            autosave_cpu_ms: self
                .autosaved
                .cpu_ms
                .load(std::sync::atomic::Ordering::Relaxed),
            ..Default::default()
        };
        for s in slots.iter().filter(|s| s.is_live()) {
            st.live += 1;
            let now = s
                .live
                .try_lock()
                .ok()
                .and_then(|g| g.as_ref().and_then(Live::memory_bytes));
            let mut m = s.meta();
            if let Some(b) = now {
                m.memory = b;
            }
            st.memory_bytes += m.memory;
        }
        st
    }

    /// Keeps the pool at `interpreters.pool_size` warm sessions, one start
    /// at a time, until `shutdown`.
    pub(crate) async fn keep_pool(
        self: Arc<Self>,
        envs: Arc<Envs>,
        sessions: Arc<SessionStore>,
        policy: impl Fn() -> Arc<Policy>,
        shutdown: CancellationToken,
    ) {
        // Failing again and again (on a full disk, say) warns once.
        let mut failing = false;
        loop {
            let p = policy();
            let size = p.interpreters.pool_size as usize;
            for w in self.pool.trim(&p) {
                discard(&sessions, w).await;
            }
            if self.pool.len() < size {
                match self.warm_one(&p, &envs, &sessions).await {
                    Ok(w) => {
                        self.pool.put(w);
                        failing = false;
                        continue;
                    }
                    Err(e) => {
                        if failing {
                            tracing::debug!(error = %e, "could not start a pooled interpreter");
                        } else {
                            tracing::warn!(error = %e, "could not start a pooled interpreter; retrying every 10 s");
                        }
                        failing = true;
                        tokio::select! {
                            _ = tokio::time::sleep(Duration::from_secs(10)) => continue,
                            _ = shutdown.cancelled() => return,
                        }
                    }
                }
            }
            tokio::select! {
                _ = self.pool.wake.notified() => {
                    tokio::select! {
                        _ = tokio::time::sleep(REFILL_DELAY) => {}
                        _ = shutdown.cancelled() => return,
                    }
                }
                _ = tokio::time::sleep(Duration::from_secs(30)) => {}
                _ = shutdown.cancelled() => return,
            }
        }
    }

    async fn warm_one(
        &self,
        policy: &Arc<Policy>,
        envs: &Envs,
        sessions: &Arc<SessionStore>,
    ) -> Result<Warm, String> {
        let lease = envs
            .ensure(&[], &|_| {})
            .await
            .map_err(|e| format!("the base environment: {e}"))?;
        let ipython = IpythonLayer::get(policy, envs, &|_| {}).await;
        let store = sessions.clone();
        let spare = tokio::task::spawn_blocking(move || store.create_spare())
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("a spare session: {e}"))?;
        let spec = StartSpec {
            name: self.jails.names.interpreter(spare.name()),
            interpreter: self.interpreter.clone(),
            workspace: spare.workspace().to_path_buf(),
            host_uid: spare.host_uid(),
            venv: lease.dir.clone(),
            env_key: lease.key.clone(),
            lease: Some(lease),
            limits: Default::default(),
            prewarm: policy.python.prewarm_imports.clone(),
            ipython,
            warm: true,
            batch: false,
            fork: Default::default(),
            agent: self.agent.clone(),
        };
        if policy.interpreters.fork_templates {
            self.templates.prepare(&self.jails, policy, &spec).await;
        }
        let started = super::fork::start(
            Some(&self.templates),
            &self.jails,
            Some(&self.egress),
            policy,
            spec,
        );
        let warmed = match started.await {
            Ok(mut live) => match live.warm_up(&policy.python.warm_up_code).await {
                Ok(None) => Ok(live),
                Ok(Some(why)) => {
                    tracing::info!(job = %live.job, why = %why, "python.warm_up_code raised in a pooled interpreter");
                    Ok(live)
                }
                Err(e) => {
                    live.kill.kill();
                    Err(format!("its warm-up cell: {e}"))
                }
            },
            Err(e) => Err(e.to_string()),
        };
        match warmed {
            Ok(live) => Ok(Warm {
                spare,
                live,
                policy: policy.clone(),
            }),
            Err(e) => {
                let store = sessions.clone();
                let _ = tokio::task::spawn_blocking(move || store.discard(spare)).await;
                Err(e)
            }
        }
    }
}

impl Interpreters {
    /// The policy in force changed: the pool replaces its spares, which
    /// [`Interpreters::claim`] no longer hands out.
    pub(crate) fn policy_changed(&self) {
        self.pool.wake.notify_one();
    }

    /// Waits, at most `within`, until the pool holds a spare; whether it
    /// does.
    pub(crate) async fn wait_for_spare(&self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while self.pool.len() == 0 {
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }

    /// Fork templates up, and starts by path.
    pub(crate) fn template_stats(&self) -> TemplateStats {
        self.templates.stats()
    }

    /// Starts the template of the default environment (`lease`, with the
    /// IPython layer `ipython`) and waits until it is up, as the server
    /// starts: a session's first call then forks, never waits.
    pub(crate) async fn start_default_template(
        &self,
        policy: &Policy,
        lease: EnvLease,
        ipython: Option<IpythonLayer>,
    ) -> Result<(), String> {
        let parts = Parts::new(
            lease,
            ipython,
            self.interpreter.clone(),
            self.agent.clone(),
            policy,
        );
        self.templates
            .prepare_default(&self.jails, policy, parts)
            .await
    }
}

/// Stops the slot's interpreter if it is idle (its lock is free). A task
/// of its own saves what of its globals can be pickled, within `save`, and
/// then kills it, holding the slot's lock meanwhile: the session's next
/// call waits for it, and nothing else does. False when busy or not live.
impl Interpreters {
    /// Stops the slot's interpreter (session `name`'s) unless a call holds
    /// it: its globals are saved in the background (within `save`), and
    /// recorded for a restart; the next call gets them back. False when
    /// busy, or when nothing lives there.
    fn stop(&self, name: &str, slot: &Arc<Slot>, reason: ResetReason, save: Duration) -> bool {
        let Ok(mut guard) = slot.live.clone().try_lock_owned() else {
            return false;
        };
        let Some(mut live) = guard.take() else {
            return false;
        };
        slot.meta().stopping = true;
        let (slot, sessions, name) = (slot.clone(), self.sessions.clone(), name.to_string());
        tokio::spawn(async move {
            let saved = if live.cells > 0 {
                live.save(save).await
            } else {
                Ok(Carried::default())
            };
            tracing::info!(job = %live.job, ?reason, saved = ?saved.as_ref().map(|c| c.names.len()), "stopping an interpreter");
            drop(live);
            let carry = match saved {
                Ok(c) if !c.names.is_empty() || !c.missed.is_empty() => {
                    super::saves::record(&sessions, &name, c.missed.clone()).await;
                    Carry::Saved {
                        unsaved: c.missed,
                        at: None,
                    }
                }
                Ok(_) => Carry::Nothing,
                Err(e) => {
                    tracing::warn!(?reason, error = %e, "saving an interpreter's globals failed");
                    Carry::Lost(lost_why(&e))
                }
            };
            let mut m = slot.meta();
            m.kill = None;
            m.stopping = false;
            m.unsaved_since = None;
            m.carry = carry;
            m.next_reason = Some(reason);
            drop(m);
            drop(guard);
        });
        true
    }
}

/// What the next call is told when a stop saved nothing.
fn lost_why(e: &super::live::AskError) -> String {
    match e {
        super::live::AskError::Timeout(_) => format!(
            "no global was kept: saving them at the stop took longer than \
             interpreters.save_timeout ({e})"
        ),
        _ => format!("no global was kept: saving them at the stop failed ({e})"),
    }
}

async fn discard(sessions: &Arc<SessionStore>, w: Warm) {
    drop(w.live);
    let store = sessions.clone();
    let _ = tokio::task::spawn_blocking(move || store.discard(w.spare)).await;
}
