//! The connection: the handshake, then a reader task that routes each
//! response to its call by id and a writer task that serializes outgoing
//! frames.

use super::call::Call;
use super::error::ClientError;
use super::shared::Shared;
use crate::frame::{self, FrameReader};
use crate::wire::{
    Hello, Reply, Request, RequestBody, Response, ResponseBody, Welcome, MAX_FRAME_BYTES,
    PROTOCOL_VERSION,
};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncWriteExt, BufReader, BufWriter};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Frames waiting for the socket; bounds what a fast uploader buffers.
const WRITE_QUEUE: usize = 8;

/// A connection to the supervisor. Cheap to clone; the connection closes
/// when the last clone is dropped, failing any calls still pending.
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
    conn: Arc<Conn>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("server", &self.conn.server)
            .field("connected", &self.is_connected())
            .finish()
    }
}

struct Conn {
    shared: Arc<Shared>,
    server: String,
    tasks: [JoinHandle<()>; 2],
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.tasks.iter().for_each(JoinHandle::abort);
        self.shared.fail_all();
    }
}

impl Client {
    /// Connect to the supervisor socket at `path` and do the handshake.
    pub async fn connect(path: &Path, client_name: &str) -> Result<Client, ClientError> {
        let stream = UnixStream::connect(path)
            .await
            .map_err(|source| ClientError::Connect {
                path: path.to_owned(),
                source,
            })?;
        let (rd, mut wr) = stream.into_split();
        let mut rd = FrameReader::new(BufReader::new(rd));
        let hello = Hello {
            protocol: PROTOCOL_VERSION,
            client: client_name.to_owned(),
        };
        frame::write_frame(&mut wr, &frame::encode(&hello)?).await?;
        let first = tokio::time::timeout(HANDSHAKE_TIMEOUT, rd.next(MAX_FRAME_BYTES))
            .await
            .map_err(|_| ClientError::Handshake("no answer to hello".into()))??
            .ok_or_else(|| {
                ClientError::Handshake(
                    "the supervisor closed the connection (is this user allowed?)".into(),
                )
            })?;
        let welcome = match frame::decode::<Welcome>(&first) {
            Ok(w) => w,
            Err(_) => match frame::decode::<Response>(&first) {
                Ok(Response {
                    body: ResponseBody::Error(e),
                    ..
                }) => return Err(ClientError::Server(e)),
                _ => return Err(ClientError::Handshake("unexpected answer to hello".into())),
            },
        };
        if welcome.protocol != PROTOCOL_VERSION {
            return Err(ClientError::Handshake(format!(
                "supervisor speaks protocol {}, this client {PROTOCOL_VERSION}",
                welcome.protocol
            )));
        }
        let (frames, queue) = mpsc::channel(WRITE_QUEUE);
        let shared = Arc::new(Shared::new(frames));
        let tasks = [
            tokio::spawn(read_loop(rd, shared.clone())),
            tokio::spawn(write_loop(wr, queue, shared.clone())),
        ];
        let conn = Arc::new(Conn {
            shared: shared.clone(),
            server: welcome.server,
            tasks,
        });
        Ok(Client { shared, conn })
    }

    /// The name the supervisor gave in its welcome.
    pub fn server_name(&self) -> &str {
        &self.conn.server
    }

    /// False once the connection is gone; every call then fails.
    pub fn is_connected(&self) -> bool {
        self.shared.pending().is_some()
    }

    /// Send a request and return a handle to its events and reply.
    /// Use [`Client::write_mount`] or [`Client::start_mount`] for uploads.
    pub async fn call(&self, body: RequestBody) -> Result<Call, ClientError> {
        if matches!(
            body,
            RequestBody::WriteMount { .. }
                | RequestBody::MountChunk { .. }
                | RequestBody::MountEnd { .. }
        ) {
            return Err(ClientError::Usage(
                "uploads go through write_mount or start_mount",
            ));
        }
        self.start(body).await
    }

    /// Send any request, uploads included.
    pub(super) async fn start(&self, body: RequestBody) -> Result<Call, ClientError> {
        let id = self.shared.next_id();
        let (tx, rx) = mpsc::unbounded_channel();
        // Registered before sending so that no response can outrun it.
        self.shared
            .pending()
            .as_mut()
            .ok_or(ClientError::Disconnected)?
            .insert(id, tx);
        if let Err(e) = self.shared.send(&Request { id, body }).await {
            self.shared.pending().as_mut().map(|m| m.remove(&id));
            return Err(e);
        }
        Ok(Call::new(id, rx, self.shared.clone()))
    }

    /// Send a request and wait for its reply, ignoring its events.
    pub async fn request(&self, body: RequestBody) -> Result<Reply, ClientError> {
        self.call(body).await?.finish().await
    }
}

async fn read_loop(mut rd: FrameReader<BufReader<OwnedReadHalf>>, shared: Arc<Shared>) {
    while let Ok(Some(body)) = rd.next(MAX_FRAME_BYTES).await {
        match frame::decode::<Response>(&body) {
            Ok(resp) => shared.deliver(resp),
            Err(_) => break,
        }
    }
    shared.fail_all();
}

async fn write_loop(wr: OwnedWriteHalf, mut queue: mpsc::Receiver<Vec<u8>>, shared: Arc<Shared>) {
    let mut wr = BufWriter::new(wr);
    while let Some(frame) = queue.recv().await {
        let mut ok = wr.write_all(&frame).await.is_ok();
        // Batch frames that are already queued into one write.
        if ok && queue.is_empty() {
            ok = wr.flush().await.is_ok();
        }
        if !ok {
            shared.fail_all();
            return;
        }
    }
}
