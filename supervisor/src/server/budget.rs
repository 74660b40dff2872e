//! The byte budget for frames still being read. A header announces up to
//! 8 MiB, and a peer may send part of that and stall; without a shared
//! budget, many such connections hold that much memory each. Each frame's
//! buffer may grow to a small allowance freely (most requests fit in it);
//! growth past it takes bytes from one budget shared by every connection,
//! waiting in line while the budget is spent. The frame reader asks it
//! before every allocation, as a [`BodyBudget`].

use prims_protocol::frame::{BodyBudget, BodyLease};
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Cheap to clone; every clone draws on the same bytes.
#[derive(Clone)]
pub(super) struct FrameBudget {
    bytes: Arc<Semaphore>,
    allowance: usize,
    total: usize,
}

#[derive(Debug, thiserror::Error)]
pub(super) enum BudgetError {
    #[error("a frame of {need} bytes needs more than the whole partial-frame budget ({total} bytes beyond a {allowance}-byte allowance)")]
    Exceeds {
        need: usize,
        total: usize,
        allowance: usize,
    },
    #[error("the partial-frame budget is closed")]
    Closed,
}

/// The budget one frame holds; given back when dropped (the frame completed,
/// or its connection ended).
pub(super) struct Lease {
    budget: FrameBudget,
    permit: Option<OwnedSemaphorePermit>,
    /// Buffer bytes this lease makes legitimate, the allowance included.
    covered: usize,
}

impl FrameBudget {
    pub(super) fn new(allowance: usize, total: usize) -> FrameBudget {
        // Permits are counted in u32 per acquisition and capped by tokio.
        let total = total.min(u32::MAX as usize).min(Semaphore::MAX_PERMITS);
        FrameBudget {
            bytes: Arc::new(Semaphore::new(total)),
            allowance,
            total,
        }
    }

    #[cfg(test)]
    pub(super) fn available(&self) -> usize {
        self.bytes.available_permits()
    }
}

impl BodyBudget for FrameBudget {
    type Lease = Lease;

    fn lease(&self) -> Lease {
        Lease {
            budget: self.clone(),
            permit: None,
            covered: self.allowance,
        }
    }
}

impl BodyLease for Lease {
    type Error = BudgetError;

    /// Make a buffer of `capacity` bytes legitimate before it is allocated:
    /// free within the allowance, else wait for the rest from the budget.
    async fn cover(&mut self, capacity: usize) -> Result<(), BudgetError> {
        if capacity <= self.covered {
            return Ok(());
        }
        let b = &self.budget;
        let exceeds = || BudgetError::Exceeds {
            need: capacity,
            total: b.total,
            allowance: b.allowance,
        };
        if capacity - b.allowance > b.total {
            return Err(exceeds());
        }
        let more = u32::try_from(capacity - self.covered).map_err(|_| exceeds())?;
        if b.bytes.available_permits() < more as usize {
            tracing::debug!(bytes = more, "waiting for the partial-frame budget");
        }
        let got = b
            .bytes
            .clone()
            .acquire_many_owned(more)
            .await
            .map_err(|_| BudgetError::Closed)?;
        match self.permit.as_mut() {
            Some(p) => p.merge(got),
            None => self.permit = Some(got),
        }
        self.covered = capacity;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prims_protocol::frame::FrameReader;
    use std::time::Duration;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn growth_past_the_allowance_draws_on_the_budget_until_dropped() {
        let budget = FrameBudget::new(10, 100);
        let mut a = budget.lease();
        a.cover(10).await.unwrap();
        assert_eq!(budget.available(), 100, "the allowance is free");
        a.cover(40).await.unwrap();
        a.cover(70).await.unwrap();
        assert_eq!(budget.available(), 40);
        a.cover(20).await.unwrap();
        assert_eq!(budget.available(), 40, "covering less takes nothing");
        drop(a);
        assert_eq!(budget.available(), 100);
    }

    #[tokio::test]
    async fn a_frame_waits_for_budget_another_holds() {
        let budget = FrameBudget::new(0, 100);
        let mut a = budget.lease();
        a.cover(80).await.unwrap();
        let mut b = budget.lease();
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(50), b.cover(30));
        assert!(waiting.await.is_err(), "b got budget a holds");
        drop(a);
        b.cover(30).await.unwrap();
        assert_eq!(budget.available(), 70);
    }

    #[tokio::test]
    async fn a_frame_bigger_than_the_whole_budget_fails_at_once() {
        let budget = FrameBudget::new(10, 100);
        let mut a = budget.lease();
        assert!(matches!(
            a.cover(111).await,
            Err(BudgetError::Exceeds { need: 111, .. })
        ));
        a.cover(110).await.unwrap();
        assert_eq!(budget.available(), 0);
    }

    #[tokio::test]
    async fn a_read_draws_on_the_budget_as_bytes_arrive_and_gives_it_back() {
        let total = 1 << 20;
        let budget = FrameBudget::new(0, total);
        let (mut tx, rx) = tokio::io::duplex(1 << 20);
        let mut frames = FrameReader::new(rx).with_budget(budget.clone());
        tx.write_all(&(512u32 << 10).to_be_bytes()).await.unwrap();
        tx.write_all(&[b' '; 20_000]).await.unwrap();
        let mut reading = Box::pin(frames.next(total));
        let stalled = tokio::time::timeout(Duration::from_millis(50), &mut reading).await;
        assert!(stalled.is_err(), "512 KiB announced, 20 000 bytes sent");
        // The buffer doubled from 8 KiB to hold what came: 32 KiB of 512.
        assert_eq!(budget.available(), total - (32 << 10));
        drop(reading);
        assert_eq!(budget.available(), total, "an abandoned read gives it back");
    }
}
