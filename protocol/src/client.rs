//! Async client for the supervisor socket. One connection carries many
//! concurrent requests: a reader task routes each response to its call by id,
//! a writer task serializes outgoing frames. When the connection drops, every
//! pending call ends with [`ClientError::Disconnected`].

mod call;

pub use call::{Call, MountUpload, Mounted};

use crate::frame::{self, read_frame, FrameError};
use crate::wire::{
    ErrorReply, Event, Hello, MountSize, Reply, Request, RequestBody, Response, ResponseBody,
    RunReply, RunRequest, Welcome, PROTOCOL_VERSION,
};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::io::{AsyncWriteExt, BufReader, BufWriter};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Frames waiting for the socket; bounds what a fast uploader buffers.
const WRITE_QUEUE: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot connect to {path}: {source}")]
    Connect {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("handshake with the supervisor failed: {0}")]
    Handshake(String),
    /// The supervisor answered the request with an error.
    #[error("supervisor error ({:?}): {}", .0.code, .0.message)]
    Server(ErrorReply),
    #[error("the connection to the supervisor was lost")]
    Disconnected,
    #[error(transparent)]
    Frame(#[from] FrameError),
    #[error("unexpected reply from the supervisor: {0:?}")]
    UnexpectedReply(Box<Reply>),
    #[error("invalid use of the client: {0}")]
    Usage(&'static str),
}

/// A connection to the supervisor. Cheap to clone; the connection closes
/// when the last clone is dropped, failing any calls still pending.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
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

type Pending = HashMap<u64, mpsc::UnboundedSender<ResponseBody>>;

struct Inner {
    frames: mpsc::Sender<Vec<u8>>,
    /// `None` once the connection is gone.
    pending: Mutex<Option<Pending>>,
    next_id: AtomicU64,
}

struct Conn {
    inner: Arc<Inner>,
    server: String,
    tasks: [JoinHandle<()>; 2],
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.tasks.iter().for_each(JoinHandle::abort);
        self.inner.fail_all();
    }
}

impl Inner {
    fn pending(&self) -> MutexGuard<'_, Option<Pending>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Dropping every sender wakes every call with `Disconnected`.
    fn fail_all(&self) {
        self.pending().take();
    }

    fn deliver(&self, resp: Response) {
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

    async fn send(&self, req: &Request) -> Result<(), ClientError> {
        let frame = frame::encode(req)?;
        self.frames
            .send(frame)
            .await
            .map_err(|_| ClientError::Disconnected)
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
        let mut rd = BufReader::new(rd);
        let hello = Hello {
            protocol: PROTOCOL_VERSION,
            client: client_name.to_owned(),
        };
        frame::write_frame(&mut wr, &frame::encode(&hello)?).await?;
        let first = tokio::time::timeout(HANDSHAKE_TIMEOUT, read_frame(&mut rd))
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
        let inner = Arc::new(Inner {
            frames,
            pending: Mutex::new(Some(HashMap::new())),
            next_id: AtomicU64::new(1),
        });
        let tasks = [
            tokio::spawn(read_loop(rd, inner.clone())),
            tokio::spawn(write_loop(wr, queue, inner.clone())),
        ];
        let conn = Arc::new(Conn {
            inner: inner.clone(),
            server: welcome.server,
            tasks,
        });
        Ok(Client { inner, conn })
    }

    /// The name the supervisor gave in its welcome.
    pub fn server_name(&self) -> &str {
        &self.conn.server
    }

    /// False once the connection is gone; every call then fails.
    pub fn is_connected(&self) -> bool {
        self.inner.pending().is_some()
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

    async fn start(&self, body: RequestBody) -> Result<Call, ClientError> {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::unbounded_channel();
        // Registered before sending so that no response can outrun it.
        self.inner
            .pending()
            .as_mut()
            .ok_or(ClientError::Disconnected)?
            .insert(id, tx);
        if let Err(e) = self.inner.send(&Request { id, body }).await {
            self.inner.pending().as_mut().map(|m| m.remove(&id));
            return Err(e);
        }
        Ok(Call::new(id, rx, self.inner.clone()))
    }

    /// Send a request and wait for its reply, ignoring its events.
    pub async fn request(&self, body: RequestBody) -> Result<Reply, ClientError> {
        self.call(body).await?.finish().await
    }

    /// Run code, passing each event to `on_event` as it arrives.
    pub async fn run(
        &self,
        req: RunRequest,
        mut on_event: impl FnMut(Event),
    ) -> Result<RunReply, ClientError> {
        let mut call = self.call(RequestBody::Run(req)).await?;
        while let Some(event) = call.next_event().await? {
            on_event(event);
        }
        match call.finish().await? {
            Reply::Run(reply) => Ok(reply),
            other => Err(ClientError::UnexpectedReply(Box::new(other))),
        }
    }

    /// Cancel request `id` of this connection; waits for the supervisor to acknowledge.
    pub async fn cancel(&self, id: u64) -> Result<(), ClientError> {
        match self.request(RequestBody::Cancel { target: id }).await? {
            Reply::Cancelled => Ok(()),
            other => Err(ClientError::UnexpectedReply(Box::new(other))),
        }
    }

    /// Write `data` to `mounts/<path>` of a session opened with no tenant.
    pub async fn write_mount(
        &self,
        session_id: &str,
        path: &str,
        data: &[u8],
    ) -> Result<Mounted, ClientError> {
        let size = MountSize::Exact(data.len() as u64);
        let mut upload = self.start_mount(session_id, None, path, size).await?;
        upload.send(data).await?;
        upload.finish().await
    }

    /// Start an upload of `size` bytes whose data is sent piecewise.
    pub async fn start_mount(
        &self,
        session_id: &str,
        tenant: Option<&str>,
        path: &str,
        size: MountSize,
    ) -> Result<MountUpload, ClientError> {
        let body = RequestBody::WriteMount {
            session_id: session_id.to_owned(),
            tenant: tenant.map(str::to_owned),
            path: path.to_owned(),
            size,
        };
        let call = self.start(body).await?;
        Ok(MountUpload::new(call, size))
    }
}

async fn read_loop(rd: BufReader<OwnedReadHalf>, inner: Arc<Inner>) {
    let mut rd = rd;
    while let Ok(Some(body)) = read_frame(&mut rd).await {
        match frame::decode::<Response>(&body) {
            Ok(resp) => inner.deliver(resp),
            Err(_) => break,
        }
    }
    inner.fail_all();
}

async fn write_loop(wr: OwnedWriteHalf, mut queue: mpsc::Receiver<Vec<u8>>, inner: Arc<Inner>) {
    let mut wr = BufWriter::new(wr);
    while let Some(frame) = queue.recv().await {
        let mut ok = wr.write_all(&frame).await.is_ok();
        // Batch frames that are already queued into one write.
        if ok && queue.is_empty() {
            ok = wr.flush().await.is_ok();
        }
        if !ok {
            inner.fail_all();
            return;
        }
    }
}
