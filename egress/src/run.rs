//! One run's state in the proxy: its rules, its budgets and what it used,
//! its record, and which run a jail's listener serves now.

use crate::decide::Rules;
use crate::log::Log;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// What one run may move through the proxy.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Both directions, over all its connections.
    pub max_bytes: u64,
    /// Connections opened (refused ones do not count).
    pub max_connections: u64,
}

/// One run: its rules and budgets, what it used, and its record.
#[derive(Debug)]
pub struct Run {
    pub rules: Rules,
    pub budget: Budget,
    pub log: Log,
    bytes: AtomicU64,
    connections: AtomicU64,
}

impl Run {
    pub fn new(rules: Rules, budget: Budget) -> Arc<Run> {
        Arc::new(Run {
            rules,
            budget,
            log: Log::default(),
            bytes: AtomicU64::new(0),
            connections: AtomicU64::new(0),
        })
    }

    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    pub(crate) fn take_connection(&self) -> bool {
        self.connections.fetch_add(1, Ordering::Relaxed) < self.budget.max_connections
    }

    pub(crate) fn take_bytes(&self, n: usize) -> bool {
        let before = self.bytes.fetch_add(n as u64, Ordering::Relaxed);
        before.saturating_add(n as u64) <= self.budget.max_bytes
    }

    pub(crate) fn out_of_bytes(&self) -> bool {
        self.bytes() >= self.budget.max_bytes
    }
}

/// The run a listener serves now. A connection belongs to the run that
/// was current when it arrived, for its whole life.
#[derive(Debug, Clone)]
pub struct Current(Arc<RwLock<Arc<Run>>>);

impl Current {
    pub fn new(run: Arc<Run>) -> Current {
        Current(Arc::new(RwLock::new(run)))
    }

    pub fn get(&self) -> Arc<Run> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Makes `run` current; returns the one it replaces.
    pub fn replace(&self, run: Arc<Run>) -> Arc<Run> {
        std::mem::replace(&mut *self.0.write().unwrap_or_else(|p| p.into_inner()), run)
    }
}
