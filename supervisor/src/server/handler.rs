//! The one thing the transport asks of the daemon: answer a request,
//! given who sent it, where its events go and what cancels it.

use super::events::EventSink;
use super::peer::Peer;
use prims_protocol::wire::{ErrorReply, Reply, RequestBody};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What a handler gets with each request.
pub struct Ctx {
    pub peer: Peer,
    /// Progress for this request.
    pub events: EventSink,
    /// Cancelled by a `Cancel` request, a disconnect or shutdown.
    pub cancel: CancellationToken,
    /// For `WriteMount`: its `MountChunk` data in order; closed once the
    /// upload is complete (the exact size arrived, or `MountEnd` came for an
    /// open-ended one), or early on cancel or disconnect. An early close
    /// always cancels `cancel` first, so a handler that sees the stream end
    /// with `cancel` untouched knows the client ended the upload itself.
    pub chunks: Option<mpsc::Receiver<Vec<u8>>>,
}

impl Ctx {
    /// For work that outlives its request (a task's run): its events go
    /// nowhere, and only `cancel` stops it.
    pub fn detached(peer: Peer, cancel: CancellationToken) -> Ctx {
        let (tx, _) = mpsc::channel(1);
        Ctx {
            peer,
            events: EventSink::new(0, tx, cancel.clone()),
            cancel,
            chunks: None,
        }
    }
}

pub trait Handler: Send + Sync + 'static {
    fn handle(
        &self,
        body: RequestBody,
        ctx: Ctx,
    ) -> impl std::future::Future<Output = Result<Reply, ErrorReply>> + Send;
}
