//! The warm pool: spare sessions, each with a jailed interpreter that has
//! already imported `python.prewarm_imports` and run no user code. A new
//! session takes one whole; the pool refills one at a time in the
//! background, its jails at idle CPU priority so refills never slow calls.

use super::live::Live;
use crate::sessions::Spare;
use prims_policy::Policy;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;

#[derive(Debug)]
pub(super) struct Warm {
    pub spare: Spare,
    pub live: Live,
    /// The policy it was started under. A reload makes it stale: its jail
    /// has the old network mode, limits and prewarm set, so no session
    /// gets it.
    pub policy: Arc<Policy>,
}

impl Warm {
    fn is_current(&self, policy: &Arc<Policy>) -> bool {
        Arc::ptr_eq(&self.policy, policy)
    }
}

#[derive(Debug, Default)]
pub(super) struct Pool {
    ready: Mutex<VecDeque<Warm>>,
    /// Wakes the refill task: one was taken, or the policy changed.
    pub wake: Notify,
}

impl Pool {
    fn ready(&self) -> MutexGuard<'_, VecDeque<Warm>> {
        self.ready.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The oldest ready interpreter that is still alive and was started
    /// under `policy`; dead or stale ones found on the way are handed back
    /// for clean-up.
    pub fn take(&self, policy: &Arc<Policy>) -> (Option<Warm>, Vec<Warm>) {
        let mut dead = Vec::new();
        let mut ready = self.ready();
        while let Some(mut w) = ready.pop_front() {
            if w.is_current(policy) && w.live.is_alive() {
                drop(ready);
                self.wake.notify_one();
                return (Some(w), dead);
            }
            dead.push(w);
        }
        drop(ready);
        self.wake.notify_one();
        (None, dead)
    }

    pub fn put(&self, w: Warm) {
        self.ready().push_back(w);
    }

    pub fn len(&self) -> usize {
        self.ready().len()
    }

    /// Removes those started under another policy than `policy`, and
    /// those beyond its `pool_size` (the policy shrank the pool).
    pub fn trim(&self, policy: &Arc<Policy>) -> Vec<Warm> {
        let mut ready = self.ready();
        let mut out = Vec::new();
        for w in std::mem::take(&mut *ready) {
            if w.is_current(policy) {
                ready.push_back(w);
            } else {
                out.push(w);
            }
        }
        let n = ready
            .len()
            .saturating_sub(policy.interpreters.pool_size as usize);
        out.extend(ready.drain(..n));
        out
    }

    /// Removes every spare (the server stops).
    pub fn drain(&self) -> Vec<Warm> {
        self.ready().drain(..).collect()
    }

    pub fn memory_bytes(&self) -> u64 {
        self.ready()
            .iter()
            .filter_map(|w| w.live.memory_bytes())
            .sum()
    }
}
