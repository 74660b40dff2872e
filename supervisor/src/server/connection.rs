//! One client connection: the handshake, the read loop that dispatches
//! requests, and the writer task that owns the socket's write half. Any
//! protocol violation closes this connection only.

use super::budget::FrameBudget;
use super::config::ConnectionLimits;
use super::handler::Handler;
use super::peer::Peer;
use super::requests::Requests;
use prims_protocol::frame::{self, FrameReader};
use prims_protocol::wire::{
    ErrorCode, ErrorReply, Hello, Request, Response, ResponseBody, Welcome, MAX_FRAME_BYTES,
    PROTOCOL_VERSION,
};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncWriteExt, BufReader, BufWriter};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Small: an idle connection keeps it for its whole life, and large bodies
/// bypass it (they are read straight into their own buffer).
const READ_BUFFER: usize = 8 * 1024;
const WRITE_BUFFER: usize = 64 * 1024;
/// A `Hello` is a version and a name; nothing bigger is read before it.
const MAX_HELLO_BYTES: usize = 4 * 1024;
/// Responses waiting for the socket; when full, handlers' events wait.
const WRITE_QUEUE: usize = 64;

/// A peer's frames: each within the frame deadline of its first byte, its
/// body growing within the shared budget.
type Frames = FrameReader<BufReader<OwnedReadHalf>, FrameBudget>;

pub(super) struct Connection<H> {
    pub peer: Peer,
    pub handler: Arc<H>,
    pub limits: ConnectionLimits,
    pub budget: FrameBudget,
    /// Cancelled when this connection ends; parent of every request's token.
    pub token: CancellationToken,
    pub tracker: TaskTracker,
}

impl<H: Handler> Connection<H> {
    pub(super) async fn run(self, stream: UnixStream) {
        let (uid, pid) = (self.peer.uid, self.peer.pid);
        let (rd, mut wr) = stream.into_split();
        let mut rd = FrameReader::new(BufReader::with_capacity(READ_BUFFER, rd))
            .with_deadline(self.limits.frame_deadline)
            .with_budget(self.budget.clone());
        let hello = tokio::select! {
            _ = self.token.cancelled() => return,
            hello = handshake(&mut rd, &mut wr, self.limits.hello_deadline) => hello,
        };
        match hello {
            Ok(client) => tracing::debug!(uid, pid, client, "client connected"),
            Err(reason) => {
                tracing::warn!(uid, pid, %reason, "handshake failed; closing the connection");
                return;
            }
        }
        let (tx, rx) = mpsc::channel(WRITE_QUEUE);
        let writer = tokio::spawn(write_loop(wr, rx, self.token.clone(), pid));
        let requests = Requests::new(
            self.peer,
            self.handler.clone(),
            self.limits.max_requests_per_connection,
            tx,
            self.token.clone(),
            self.tracker.clone(),
        );
        let ended = loop {
            tokio::select! {
                _ = self.token.cancelled() => break Ok(()),
                next = next_request(&mut rd, &requests) => match next {
                    Ok(true) => {}
                    Ok(false) => break Ok(()),
                    Err(reason) => break Err(reason),
                },
            }
        };
        match ended {
            Ok(()) => tracing::debug!(uid, pid, "connection closed"),
            Err(reason) => tracing::warn!(uid, pid, %reason, "closing connection: protocol error"),
        }
        // A client that goes away takes its requests with it.
        self.token.cancel();
        requests.close();
        let _ = writer.await;
    }
}

/// Read and dispatch one request; `Ok(false)` at a clean end of stream.
async fn next_request<H: Handler>(rd: &mut Frames, requests: &Requests<H>) -> Result<bool, String> {
    let Some(body) = rd.next(MAX_FRAME_BYTES).await.map_err(|e| e.to_string())? else {
        return Ok(false);
    };
    let req: Request = frame::decode(&body).map_err(|e| e.to_string())?;
    requests.dispatch(req).await?;
    Ok(true)
}

/// Just the version, read leniently so that a newer client still learns why
/// it was refused.
#[derive(serde::Deserialize)]
struct VersionProbe {
    protocol: u32,
}

/// Expect a `Hello` of our version within `deadline` of the connection;
/// answer `Welcome`, or an error frame. Returns the client's name, or why not.
async fn handshake(
    rd: &mut Frames,
    wr: &mut OwnedWriteHalf,
    deadline: Duration,
) -> Result<String, String> {
    let first = match tokio::time::timeout(deadline, rd.next(MAX_HELLO_BYTES)).await {
        Err(_) => return Err(format!("no hello within {deadline:?}")),
        Ok(Err(e)) => return Err(e.to_string()),
        Ok(Ok(None)) => return Err("closed before hello".into()),
        Ok(Ok(Some(first))) => first,
    };
    let refusal = match frame::decode::<VersionProbe>(&first) {
        Err(_) => "the first frame must be a hello".to_owned(),
        Ok(p) if p.protocol != PROTOCOL_VERSION => format!(
            "client speaks protocol {}, this supervisor speaks {PROTOCOL_VERSION}",
            p.protocol
        ),
        Ok(_) => match frame::decode::<Hello>(&first) {
            Ok(hello) => {
                let welcome = Welcome {
                    protocol: PROTOCOL_VERSION,
                    server: format!("prims-supervisor {}", env!("CARGO_PKG_VERSION")),
                };
                send_now(wr, &welcome).await?;
                // The name is only for logs; keep a hostile one short.
                return Ok(hello.client.chars().take(64).collect());
            }
            Err(e) => format!("malformed hello: {e}"),
        },
    };
    let error = Response {
        id: 0,
        body: ResponseBody::Error(ErrorReply {
            code: ErrorCode::BadRequest,
            message: refusal.clone(),
        }),
    };
    let _ = send_now(wr, &error).await;
    let _ = wr.shutdown().await;
    Err(refusal)
}

async fn send_now<T: serde::Serialize>(wr: &mut OwnedWriteHalf, msg: &T) -> Result<(), String> {
    let bytes = frame::encode(msg).map_err(|e| e.to_string())?;
    wr.write_all(&bytes).await.map_err(|e| e.to_string())
}

/// Owns the write half: encodes responses in order, batching those already
/// queued into one write. A failed write ends the connection.
async fn write_loop(
    wr: OwnedWriteHalf,
    mut rx: mpsc::Receiver<Response>,
    token: CancellationToken,
    pid: i32,
) {
    let mut wr = BufWriter::with_capacity(WRITE_BUFFER, wr);
    loop {
        let resp = tokio::select! {
            _ = token.cancelled() => return write_queued(wr, rx, pid).await,
            resp = rx.recv() => match resp {
                Some(resp) => resp,
                None => return,
            },
        };
        let Some(bytes) = encode_or_substitute(&resp, pid) else {
            continue;
        };
        let written = tokio::select! {
            _ = token.cancelled() => return,
            r = async {
                wr.write_all(&bytes).await?;
                if rx.is_empty() {
                    wr.flush().await?;
                }
                std::io::Result::Ok(())
            } => r,
        };
        if let Err(e) = written {
            tracing::debug!(pid, error = %e, "write failed; closing the connection");
            token.cancel();
            return;
        }
    }
}

/// A closing connection still writes the answers already queued (a
/// graceful stop's answers to the calls it interrupted), for a moment.
async fn write_queued(
    mut wr: BufWriter<OwnedWriteHalf>,
    mut rx: mpsc::Receiver<Response>,
    pid: i32,
) {
    let written = async {
        while let Ok(resp) = rx.try_recv() {
            if let Some(bytes) = encode_or_substitute(&resp, pid) {
                wr.write_all(&bytes).await?;
            }
        }
        wr.flush().await
    };
    if tokio::time::timeout(QUEUED_WRITE, written).await.is_err() {
        tracing::debug!(
            pid,
            "a closing connection's last answers were not read in time"
        );
    }
}

/// How long a closing connection waits for its client to read its last
/// answers.
const QUEUED_WRITE: Duration = Duration::from_secs(2);

/// A response too big for a frame becomes an `Internal` error for its
/// request (or is dropped, for an event), so the client is never left waiting.
fn encode_or_substitute(resp: &Response, pid: i32) -> Option<Vec<u8>> {
    let e = match frame::encode(resp) {
        Ok(bytes) => return Some(bytes),
        Err(e) => e,
    };
    tracing::warn!(pid, id = resp.id, error = %e, "response cannot be sent");
    if matches!(resp.body, ResponseBody::Event(_)) {
        return None;
    }
    let substitute = Response {
        id: resp.id,
        body: ResponseBody::Error(ErrorReply {
            code: ErrorCode::Internal,
            message: format!("the reply could not be sent: {e}"),
        }),
    };
    frame::encode(&substitute).ok()
}
