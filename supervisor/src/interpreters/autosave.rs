//! Saving each session's globals in the background, so that a crash of the
//! server (SIGKILL, the OOM killer, a power cut) loses at most what calls
//! did in the last `interpreters.autosave_after`: the next start restores
//! the last save, as after a graceful stop.
//!
//! A call that ran cells marks its session unsaved (`unsaved_since`, the
//! end of the first such call). A watch, once a second, saves each session
//! unsaved for `autosave_after`, as an idle stop does (the agent pickles
//! the globals into the workspace, synced to disk, and the session's
//! metadata records it durably) but with the interpreter left running:
//! - never during a call: the save takes the session's interpreter lock,
//!   which a call holds from start to end, and waits its turn behind a
//!   running call (the lock is fair, so the save goes before the next
//!   call, and a session busy with call after call is still saved between
//!   two of them);
//! - at idle CPU priority, so that sessions at work come first;
//! - only for sessions that changed since their last save.
//!
//! A save that fails (past `save_timeout`, the workspace full) leaves the
//! last good save on record and is tried again a period later.

use super::registry::Interpreters;
use super::saves::{record, Tally};
use super::slot::Slot;
use crate::sessions::SessionStore;
use prims_cgroup::CpuPriority;
use prims_policy::Policy;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How often the watch looks for sessions due a save.
const WATCH_EVERY: Duration = Duration::from_secs(1);

impl Interpreters {
    /// Saves unsaved sessions in the background until `shutdown` (the
    /// graceful stop saves them all itself).
    pub(crate) async fn keep_saved(
        self: Arc<Self>,
        policy: impl Fn() -> Arc<Policy>,
        shutdown: CancellationToken,
    ) {
        let mut tick = tokio::time::interval(WATCH_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = shutdown.cancelled() => return,
            }
            let p = policy();
            let after = p.interpreters.autosave_after.0;
            if after.is_zero() {
                continue;
            }
            for (name, slot) in self.due(after) {
                let to = (self.sessions.clone(), self.autosaved.clone());
                let save = p.interpreters.save_timeout.0;
                tokio::spawn(autosave(name, slot, to, save));
            }
        }
    }

    /// Sessions unsaved for `after`, each marked as being saved.
    fn due(&self, after: Duration) -> Vec<(String, Arc<Slot>)> {
        let now = Instant::now();
        self.named_slots()
            .into_iter()
            .filter(|(_, s)| {
                let mut m = s.meta();
                let due = !m.autosaving
                    && !m.stopping
                    && m.unsaved_since
                        .is_some_and(|t| now.duration_since(t) >= after);
                m.autosaving |= due;
                due
            })
            .collect()
    }
}

/// A call ran `cells` in the slot's interpreter: it is unsaved from now,
/// unless it already was.
pub(super) fn changed(slot: &Slot) {
    let mut m = slot.meta();
    if m.unsaved_since.is_none() {
        m.unsaved_since = Some(Instant::now());
    }
}

/// Saves the slot's interpreter once no call holds it; records the save,
/// and counts it in `tally`.
async fn autosave(
    name: String,
    slot: Arc<Slot>,
    (sessions, tally): (Arc<SessionStore>, Arc<Tally>),
    deadline: Duration,
) {
    let mut guard = slot.live.clone().lock_owned().await;
    let began = Instant::now();
    let live = guard
        .as_mut()
        .filter(|l| l.cells > 0)
        .filter(|l| !l.exit.is_terminated());
    // Stopped meanwhile, or never ran a cell, or gone: a stop saved it, or
    // there is nothing to save.
    let outcome = match live {
        None => None,
        Some(live) => {
            // Calls that come meanwhile wait for the lock, and find the
            // session saved, changed again only by themselves.
            slot.meta().unsaved_since = None;
            let normal = if live.batch {
                CpuPriority::Batch
            } else {
                CpuPriority::Normal
            };
            set_priority(live, CpuPriority::Idle);
            let before = cpu_ns(live);
            let saved = live.save(deadline).await;
            if let Some(ns) = cpu_ns(live).zip(before).map(|(a, b)| a.saturating_sub(b)) {
                tally.cpu_ms.fetch_add(ns / 1_000_000, Ordering::Relaxed);
            }
            tally.saves.fetch_add(1, Ordering::Relaxed);
            set_priority(live, normal);
            Some(saved)
        }
    };
    drop(guard);
    let ms = began.elapsed().as_millis() as u64;
    match outcome {
        None => {}
        Some(Ok(carried)) => {
            tracing::debug!(session = %name, ms, saved = carried.names.len(), "autosaved");
            record(&sessions, &name, carried.missed).await;
        }
        Some(Err(e)) => {
            tracing::warn!(session = %name, ms, error = %e, "an autosave failed; the last one stands, and it is tried again later");
            let mut m = slot.meta();
            m.unsaved_since.get_or_insert_with(Instant::now);
        }
    }
    slot.meta().autosaving = false;
}

/// CPU the interpreter's jail has used, as its cgroup counts it.
fn cpu_ns(live: &super::live::Live) -> Option<u64> {
    live.cgroup.as_ref()?.usage().ok()?.cpu_ns
}

fn set_priority(live: &super::live::Live, p: CpuPriority) {
    if let Some(cg) = &live.cgroup {
        if let Err(e) = cg.set_cpu_priority(p) {
            tracing::debug!(job = %live.job, error = %e, "could not set an interpreter's CPU priority for its autosave");
        }
    }
}
