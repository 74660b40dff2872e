//! One run's state in the proxy: its rules, its budgets and what it used,
//! its record, its connections, and which run a jail's listener serves now.
//! A connection lives no longer than the run that accepted it: when the run
//! ends, its connections are closed, so bytes move only during the call they
//! are charged to and reported in.

use crate::decide::Rules;
use crate::log::Log;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

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
    /// Cancelled when the run ends; its connections close with it.
    ended: CancellationToken,
    tasks: TaskTracker,
}

impl Run {
    pub fn new(rules: Rules, budget: Budget) -> Arc<Run> {
        Arc::new(Run {
            rules,
            budget,
            log: Log::default(),
            bytes: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            ended: CancellationToken::new(),
            tasks: TaskTracker::new(),
        })
    }

    /// Serves one of its connections, until the work is done or the run
    /// ends.
    pub fn serve(&self, work: impl Future<Output = ()> + Send + 'static) {
        let ended = self.ended.clone();
        self.tasks.spawn(async move {
            tokio::select! {
                () = work => {}
                () = ended.cancelled() => {}
            }
        });
    }

    /// Ends the run: closes every connection it accepted and waits, at most
    /// `within`, until they are gone, so that its record is final.
    pub async fn end(&self, within: Duration) {
        self.ended.cancel();
        self.tasks.close();
        if tokio::time::timeout(within, self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("egress: a run's connections did not close in time");
        }
    }

    /// It refuses everything: no call runs in its jail.
    pub fn is_idle(&self) -> bool {
        self.rules.closed.is_some()
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

    /// Makes `run` current; returns the one it replaces. What the jail
    /// tried while no call ran goes into `run`'s record.
    pub fn replace(&self, run: Arc<Run>) -> Arc<Run> {
        let mut current = self.0.write().unwrap_or_else(|p| p.into_inner());
        if current.is_idle() {
            run.log.absorb(&current.log);
        }
        std::mem::replace(&mut *current, run)
    }

    /// Records a refusal of a connection accepted while no call ran, in the
    /// record of the run current now: the next call's, if one began since.
    pub fn refused_while_idle(&self, host: &str, port: u16, reason: &str) {
        let current = self.0.read().unwrap_or_else(|p| p.into_inner());
        current.log.denied(host, port, reason);
    }
}
