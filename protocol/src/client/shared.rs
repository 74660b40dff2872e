//! What one connection's calls share: the queue of outgoing frames, the
//! calls waiting for responses, and the next request id.

use super::error::ClientError;
use crate::frame;
use crate::wire::{Request, Response, ResponseBody};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use tokio::sync::mpsc;

type Pending = HashMap<u64, mpsc::UnboundedSender<ResponseBody>>;

pub(super) struct Shared {
    /// Encoded frames for the writer task.
    pub(super) frames: mpsc::Sender<Vec<u8>>,
    /// `None` once the connection is gone.
    pending: Mutex<Option<Pending>>,
    next_id: AtomicU64,
}

impl Shared {
    pub(super) fn new(frames: mpsc::Sender<Vec<u8>>) -> Shared {
        Shared {
            frames,
            pending: Mutex::new(Some(HashMap::new())),
            next_id: AtomicU64::new(1),
        }
    }

    /// An id no other request of this connection has.
    pub(super) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The calls waiting for responses; `None` once the connection is gone.
    pub(super) fn pending(&self) -> MutexGuard<'_, Option<Pending>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Dropping every sender wakes every call with `Disconnected`.
    pub(super) fn fail_all(&self) {
        self.pending().take();
    }

    /// Route a response to its call; a reply or error ends the call.
    pub(super) fn deliver(&self, resp: Response) {
        let mut pending = self.pending();
        let Some(map) = pending.as_mut() else { return };
        let tx = match resp.body {
            ResponseBody::Event(_) => map.get(&resp.id).cloned(),
            _ => map.remove(&resp.id),
        };
        // Responses for calls already dropped are expected and ignored.
        if let Some(tx) = tx {
            let _ = tx.send(resp.body);
        }
    }

    /// Queue `req` for the writer, waiting for room.
    pub(super) async fn send(&self, req: &Request) -> Result<(), ClientError> {
        let frame = frame::encode(req)?;
        self.frames
            .send(frame)
            .await
            .map_err(|_| ClientError::Disconnected)
    }
}
