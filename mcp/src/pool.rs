//! The front-end's connections to the supervisor: a small pool, each
//! connection shared by every call that lands on it and replaced when it
//! dies (the supervisor restarted, say). The requests themselves are
//! [`Client`]'s typed methods.

use prims_protocol::client::{Client, ClientError};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::Mutex;

/// Connections kept open; the supervisor allows 64 requests in flight on each.
const POOL: usize = 4;

pub(crate) struct SupervisorPool {
    socket: PathBuf,
    slots: Vec<Mutex<Option<Client>>>,
    next: AtomicUsize,
}

impl std::fmt::Debug for SupervisorPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SupervisorPool")
            .field("socket", &self.socket)
            .finish()
    }
}

impl SupervisorPool {
    pub(crate) fn new(socket: PathBuf) -> SupervisorPool {
        SupervisorPool {
            socket,
            slots: (0..POOL).map(|_| Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
        }
    }

    /// A connected client, round-robin over the pool; a dead connection is
    /// replaced by a new one.
    pub(crate) async fn client(&self) -> Result<Client, ClientError> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        let mut slot = self.slots[i].lock().await;
        if let Some(c) = slot.as_ref().filter(|c| c.is_connected()) {
            return Ok(c.clone());
        }
        let c = Client::connect(&self.socket, "prims-mcp").await?;
        tracing::debug!(slot = i, "connected to the supervisor");
        *slot = Some(c.clone());
        Ok(c)
    }
}
