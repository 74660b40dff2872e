//! Admission: at most `max_concurrent_runs` session calls and
//! `max_concurrent_fresh_runs` batch runs at once, a bounded queue behind
//! them, and a clear "busy" past that rather than a hang. Batch runs
//! (`fresh: true`, each in a new interpreter) have slots of their own and
//! run at batch CPU weight, so a session's call never queues behind an
//! evaluation harness's load: it takes the CPU from it instead.

use prims_protocol::wire::{ErrorCode, ErrorReply};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

/// Which slots a run takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RunClass {
    /// A call in a session's interpreter, kept or new.
    Interactive,
    /// A call that asked for a fresh interpreter.
    Batch,
}

pub(super) struct Scheduler {
    interactive: Arc<Semaphore>,
    batch: Arc<Semaphore>,
    max_queue: usize,
    queued: AtomicUsize,
    active: Arc<AtomicUsize>,
    total: AtomicU64,
}

/// A run slot; the run ends when this drops.
pub(super) struct Slot {
    _permit: OwnedSemaphorePermit,
    active: Arc<AtomicUsize>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.active.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Scheduler {
    pub(super) fn new(max_concurrent: usize, max_fresh: usize, max_queue: usize) -> Self {
        Scheduler {
            interactive: Arc::new(Semaphore::new(max_concurrent.max(1))),
            batch: Arc::new(Semaphore::new(max_fresh.max(1))),
            max_queue,
            queued: AtomicUsize::new(0),
            active: Arc::new(AtomicUsize::new(0)),
            total: AtomicU64::new(0),
        }
    }

    /// Wait for a slot of `class`. `on_queued` hears the queue position
    /// once, if the run has to wait at all.
    pub(super) async fn admit(
        &self,
        class: RunClass,
        cancel: &CancellationToken,
        on_queued: impl FnOnce(u32),
    ) -> Result<Slot, ErrorReply> {
        let slots = match class {
            RunClass::Interactive => &self.interactive,
            RunClass::Batch => &self.batch,
        };
        let permit = match slots.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                let ahead = self.queued.fetch_add(1, Ordering::SeqCst);
                let _leave = QueueGuard(&self.queued);
                if ahead >= self.max_queue {
                    return Err(ErrorReply {
                        code: ErrorCode::Busy,
                        message: format!(
                            "busy: {ahead} runs are already waiting (limit {}); retry in a few seconds",
                            self.max_queue
                        ),
                    });
                }
                on_queued(ahead as u32 + 1);
                tokio::select! {
                    p = slots.clone().acquire_owned() => p.map_err(|_| ErrorReply {
                        code: ErrorCode::Internal,
                        message: "the scheduler is shutting down".into(),
                    })?,
                    _ = cancel.cancelled() => return Err(cancelled()),
                }
            }
        };
        self.active.fetch_add(1, Ordering::Relaxed);
        self.total.fetch_add(1, Ordering::Relaxed);
        Ok(Slot {
            _permit: permit,
            active: self.active.clone(),
        })
    }

    pub(super) fn active(&self) -> u64 {
        self.active.load(Ordering::Relaxed) as u64
    }

    pub(super) fn queued(&self) -> u64 {
        self.queued.load(Ordering::Relaxed) as u64
    }

    pub(super) fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }
}

struct QueueGuard<'a>(&'a AtomicUsize);

impl Drop for QueueGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

pub(super) fn cancelled() -> ErrorReply {
    ErrorReply {
        code: ErrorCode::Cancelled,
        message: "the run was cancelled".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn overflow_is_busy_not_a_hang() {
        let s = Arc::new(Scheduler::new(1, 1, 1));
        let never = CancellationToken::new();
        let first = s
            .admit(RunClass::Interactive, &never, |_| {})
            .await
            .unwrap();
        // One waiter fits in the queue...
        let s2 = s.clone();
        let waiter = tokio::spawn(async move {
            let c = CancellationToken::new();
            s2.admit(RunClass::Interactive, &c, |_| {})
                .await
                .map(|_| ())
        });
        while s.queued() == 0 {
            tokio::task::yield_now().await;
        }
        // ...the next one is refused at once.
        let err = s
            .admit(RunClass::Interactive, &never, |_| {})
            .await
            .err()
            .unwrap();
        assert_eq!(err.code, ErrorCode::Busy);
        drop(first);
        waiter.await.unwrap().unwrap();
        assert_eq!(s.total(), 2);
    }

    #[tokio::test]
    async fn a_cancelled_waiter_leaves_the_queue() {
        let s = Scheduler::new(1, 1, 4);
        let never = CancellationToken::new();
        let _first = s
            .admit(RunClass::Interactive, &never, |_| {})
            .await
            .unwrap();
        let c = CancellationToken::new();
        c.cancel();
        let err = s
            .admit(RunClass::Interactive, &c, |pos| assert_eq!(pos, 1))
            .await
            .err()
            .unwrap();
        assert_eq!(err.code, ErrorCode::Cancelled);
        assert_eq!(s.queued(), 0);
    }

    #[tokio::test]
    async fn batch_runs_have_a_count_of_their_own() {
        let s = Scheduler::new(1, 2, 4);
        let never = CancellationToken::new();
        let _a = s.admit(RunClass::Batch, &never, |_| {}).await.unwrap();
        let _b = s.admit(RunClass::Batch, &never, |_| {}).await.unwrap();
        let _call = s
            .admit(RunClass::Interactive, &never, |_| {})
            .await
            .unwrap();
        assert_eq!(s.active(), 3);
        let c = CancellationToken::new();
        c.cancel();
        for class in [RunClass::Batch, RunClass::Interactive] {
            let err = s.admit(class, &c, |pos| assert_eq!(pos, 1)).await.err();
            assert_eq!(err.map(|e| e.code), Some(ErrorCode::Cancelled), "{class:?}");
        }
    }

    #[tokio::test]
    async fn a_session_call_never_queues_behind_batch_runs() {
        let s = Scheduler::new(1, 1, 4);
        let never = CancellationToken::new();
        let _batch = s.admit(RunClass::Batch, &never, |_| {}).await.unwrap();
        let queued = std::cell::Cell::new(false);
        let call = s
            .admit(RunClass::Interactive, &never, |_| queued.set(true))
            .await
            .unwrap();
        assert!(!queued.get(), "the session's call waited for a batch slot");
        assert_eq!(s.active(), 2);
        // A second batch run waits for the first, not for the call.
        let c = CancellationToken::new();
        c.cancel();
        let err = s
            .admit(RunClass::Batch, &c, |pos| assert_eq!(pos, 1))
            .await
            .err()
            .unwrap();
        assert_eq!(err.code, ErrorCode::Cancelled);
        drop(call);
    }
}
