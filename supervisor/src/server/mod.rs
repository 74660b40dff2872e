//! The supervisor socket: listener, peer check, framed connections, request
//! dispatch. The transport knows nothing about sessions or runs; a
//! [`Handler`] answers each request.

mod budget;
mod connection;
mod listener;
mod peer;
mod requests;
mod slots;

use prims_protocol::wire::{ErrorReply, Event, Reply, RequestBody, Response, ResponseBody};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use listener::serve;
pub use peer::NOBODY_UID;

/// The process at the other end of a connection, from `SO_PEERCRED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    pub uid: u32,
    pub gid: u32,
    pub pid: i32,
}

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

pub struct ServerConfig {
    pub socket: PathBuf,
    /// Uids allowed to connect besides root. [`NOBODY_UID`] is never
    /// allowed, listed or not.
    pub allowed_uids: Vec<u32>,
    /// Group given to the socket file (mode 0660).
    pub socket_group: Option<u32>,
    pub limits: ConnectionLimits,
}

/// What one peer may hold on the socket. Every allowed peer is still treated
/// as hostile input: the front-end faces the network and may be compromised.
#[derive(Debug, Clone)]
pub struct ConnectionLimits {
    /// Open connections, all peers together.
    pub max_connections: usize,
    /// Open connections of one uid, so that one peer (say, a compromised
    /// front-end) cannot take every slot from the others.
    pub max_connections_per_uid: usize,
    /// In-flight requests per connection; more are answered `Busy`.
    pub max_requests_per_connection: usize,
    /// From accept to a complete `Hello`.
    pub hello_deadline: Duration,
    /// From a frame's first byte to its last. Idle time between frames is
    /// not limited: the front-end keeps its connections open.
    pub frame_deadline: Duration,
    /// Bytes every connection may hold for the frame it is reading without
    /// drawing on `partial_frame_budget`; requests are usually this small.
    pub frame_allowance: usize,
    /// Bytes held by partial frames beyond their allowance, all connections
    /// together. A frame that needs more waits (within its deadline).
    pub partial_frame_budget: usize,
}

impl Default for ConnectionLimits {
    /// The daemon's limits, as docs/architecture.md (The supervisor socket)
    /// states them.
    fn default() -> Self {
        ConnectionLimits {
            max_connections: 256,
            max_connections_per_uid: 128,
            max_requests_per_connection: 64,
            hello_deadline: Duration::from_secs(5),
            frame_deadline: Duration::from_secs(10),
            frame_allowance: 64 * 1024,
            partial_frame_budget: 32 * 1024 * 1024,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("refusing socket path {0}: it is a symbolic link")]
    Symlink(PathBuf),
    #[error("refusing socket path {0}: it exists and is not a socket")]
    NotASocket(PathBuf),
    #[error("another process is already listening on {0}")]
    InUse(PathBuf),
    #[error("socket {path}: {what}: {source}")]
    Io {
        path: PathBuf,
        what: &'static str,
        source: std::io::Error,
    },
}

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
    fn new(id: u64, tx: mpsc::Sender<Response>, cancel: CancellationToken) -> Self {
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

    fn finish(&self) {
        self.finished.store(true, Ordering::Release);
    }
}
