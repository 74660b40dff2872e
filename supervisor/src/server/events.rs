//! The progress events of one request, on their way to its connection.

use prims_protocol::wire::{Event, Response, ResponseBody};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Sends the events of one request. Bounded: sending waits while the client
/// is slow to read. Events sent after the request finished are dropped.
#[derive(Clone)]
pub struct EventSink {
    id: u64,
    tx: mpsc::Sender<Response>,
    finished: Arc<AtomicBool>,
    /// A cancelled request stops waiting on a client that does not read.
    cancel: CancellationToken,
}

impl EventSink {
    pub(super) fn new(id: u64, tx: mpsc::Sender<Response>, cancel: CancellationToken) -> Self {
        EventSink {
            id,
            tx,
            finished: Arc::new(AtomicBool::new(false)),
            cancel,
        }
    }

    fn wrap(&self, event: Event) -> Option<Response> {
        (!self.finished.load(Ordering::Acquire)).then_some(Response {
            id: self.id,
            body: ResponseBody::Event(event),
        })
    }

    /// Send an event, waiting for room; dropped once the request is
    /// cancelled (a gone client shows up as that, not as an error here).
    pub async fn send(&self, event: Event) {
        if let Some(resp) = self.wrap(event) {
            tokio::select! {
                _ = self.cancel.cancelled() => {}
                _ = self.tx.send(resp) => {}
            }
        }
    }

    /// Send an event if there is room now, else drop it (for progress notes).
    pub fn try_send(&self, event: Event) {
        if let Some(resp) = self.wrap(event) {
            let _ = self.tx.try_send(resp);
        }
    }

    /// [`EventSink::send`] for std threads; panics if called from async code.
    pub fn blocking_send(&self, event: Event) {
        if let Some(resp) = self.wrap(event) {
            let _ = self.tx.blocking_send(resp);
        }
    }

    pub(super) fn finish(&self) {
        self.finished.store(true, Ordering::Release);
    }
}
