//! The front-end's side of the supervisor socket: a small pool of
//! connections, reconnected on demand, and typed helpers for each request.

use crate::sessions::SessionRef;
use prims_protocol::client::{Call, Client, ClientError, MountUpload};
use prims_protocol::wire::{
    DirEntry, ErrorCode, ErrorReply, FileData, MountSize, Reply, RequestBody, SessionInfo, Stats,
    MAX_CHUNK_BYTES,
};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::Mutex;

/// Connections kept open; the supervisor allows 64 requests in flight on each.
const POOL: usize = 4;

pub struct Supervisor {
    socket: PathBuf,
    slots: Vec<Mutex<Option<Client>>>,
    next: AtomicUsize,
}

impl std::fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supervisor")
            .field("socket", &self.socket)
            .finish()
    }
}

impl Supervisor {
    pub fn new(socket: PathBuf) -> Supervisor {
        Supervisor {
            socket,
            slots: (0..POOL).map(|_| Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
        }
    }

    /// A connected client, round-robin over the pool; a dead connection is
    /// replaced by a new one.
    pub async fn client(&self) -> Result<Client, ClientError> {
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

    pub async fn call(&self, body: RequestBody) -> Result<Call, ClientError> {
        self.client().await?.call(body).await
    }

    pub async fn request(&self, body: RequestBody) -> Result<Reply, ClientError> {
        self.client().await?.request(body).await
    }

    pub async fn open_session(&self, tenant: Option<String>) -> Result<SessionInfo, ClientError> {
        match self.request(RequestBody::OpenSession { tenant }).await? {
            Reply::Session(s) => Ok(s),
            other => Err(unexpected(other)),
        }
    }

    pub async fn session_info(&self, s: &SessionRef) -> Result<SessionInfo, ClientError> {
        let body = RequestBody::SessionInfo {
            session_id: s.id.clone(),
            tenant: s.tenant.clone(),
        };
        match self.request(body).await? {
            Reply::Session(s) => Ok(s),
            other => Err(unexpected(other)),
        }
    }

    pub async fn close_session(&self, s: &SessionRef) -> Result<(), ClientError> {
        let body = RequestBody::CloseSession {
            session_id: s.id.clone(),
            tenant: s.tenant.clone(),
        };
        match self.request(body).await? {
            Reply::Closed => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    pub async fn list_dir(&self, s: &SessionRef, path: &str) -> Result<Vec<DirEntry>, ClientError> {
        let body = RequestBody::ListDir {
            session_id: s.id.clone(),
            tenant: s.tenant.clone(),
            path: path.to_owned(),
        };
        match self.request(body).await? {
            Reply::Dir { entries } => Ok(entries),
            other => Err(unexpected(other)),
        }
    }

    /// Up to `limit` bytes (at most one frame's worth) of a file, from `offset`.
    pub async fn read_file(
        &self,
        s: &SessionRef,
        path: &str,
        offset: u64,
        limit: u64,
    ) -> Result<FileData, ClientError> {
        let body = RequestBody::ReadFile {
            session_id: s.id.clone(),
            tenant: s.tenant.clone(),
            path: path.to_owned(),
            offset,
            limit,
        };
        match self.request(body).await? {
            Reply::File(f) => Ok(f),
            other => Err(unexpected(other)),
        }
    }

    /// A whole file, refused with `Quota` when it is larger than `max`.
    pub async fn read_all(
        &self,
        s: &SessionRef,
        path: &str,
        max: u64,
    ) -> Result<Vec<u8>, ClientError> {
        let chunk = MAX_CHUNK_BYTES as u64;
        let first = self.read_file(s, path, 0, chunk.min(max)).await?;
        if first.size > max {
            return Err(ClientError::Server(ErrorReply {
                code: ErrorCode::Quota,
                message: format!(
                    "{path} has {} bytes, more than the limit of {max} bytes",
                    first.size
                ),
            }));
        }
        let mut data = first.data;
        let mut eof = first.eof;
        while !eof && (data.len() as u64) < max {
            let next = self.read_file(s, path, data.len() as u64, chunk).await?;
            if next.data.is_empty() {
                break;
            }
            data.extend_from_slice(&next.data);
            eof = next.eof;
        }
        data.truncate(max as usize);
        Ok(data)
    }

    pub async fn start_mount(
        &self,
        s: &SessionRef,
        path: &str,
        size: MountSize,
    ) -> Result<MountUpload, ClientError> {
        self.client()
            .await?
            .start_mount(&s.id, s.tenant.as_deref(), path, size)
            .await
    }

    pub async fn stats(&self) -> Result<Stats, ClientError> {
        match self.request(RequestBody::Stats).await? {
            Reply::Stats(s) => Ok(s),
            other => Err(unexpected(other)),
        }
    }
}

fn unexpected(reply: Reply) -> ClientError {
    ClientError::UnexpectedReply(Box::new(reply))
}

/// The supervisor's error code, if the supervisor answered with one.
pub fn error_code(e: &ClientError) -> Option<ErrorCode> {
    match e {
        ClientError::Server(r) => Some(r.code),
        _ => None,
    }
}

/// A sentence a model (or a person) can act on.
pub fn describe(e: &ClientError) -> String {
    match e {
        ClientError::Server(r) => match r.code {
            ErrorCode::Busy => format!(
                "The sandbox is busy ({}). Retry in a few seconds.",
                r.message
            ),
            ErrorCode::Internal => format!("The sandbox failed internally: {}", r.message),
            _ => r.message.clone(),
        },
        ClientError::Connect { .. } | ClientError::Disconnected | ClientError::Handshake(_) => {
            tracing::warn!(error = %e, "supervisor unavailable");
            "The sandbox service is unavailable right now; retry in a few seconds.".into()
        }
        other => {
            tracing::error!(error = %other, "supervisor protocol error");
            "The sandbox service answered unexpectedly; retry, and report this if it persists."
                .into()
        }
    }
}
