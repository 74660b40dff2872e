//! The warm pool: spare sessions, each with a jailed interpreter that has
//! already imported `python.prewarm_imports` and run no user code. A new
//! session takes one whole; the pool refills one at a time in the
//! background, its jails at idle CPU priority so refills never slow calls.

use super::live::Live;
use crate::sessions::Spare;
use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};
use tokio::sync::Notify;

#[derive(Debug)]
pub(super) struct Warm {
    pub spare: Spare,
    pub live: Live,
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

    /// The oldest ready interpreter that is still alive; dead ones found on
    /// the way are handed back for clean-up.
    pub fn take(&self) -> (Option<Warm>, Vec<Warm>) {
        let mut dead = Vec::new();
        let mut ready = self.ready();
        while let Some(mut w) = ready.pop_front() {
            if w.live.is_alive() {
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

    /// Removes those beyond `size` (the policy shrank the pool).
    pub fn trim(&self, size: usize) -> Vec<Warm> {
        let mut ready = self.ready();
        let n = ready.len().saturating_sub(size);
        ready.drain(..n).collect()
    }

    pub fn memory_bytes(&self) -> u64 {
        self.ready()
            .iter()
            .filter_map(|w| w.live.memory_bytes())
            .sum()
    }
}
