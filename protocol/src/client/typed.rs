//! One method per request, taking plain arguments and returning the wire
//! type its reply carries. A request about a session names the tenant it
//! acts for (`None` without bearer tokens); the supervisor answers another
//! tenant's session exactly as a missing one. A reply of the wrong kind is
//! [`ClientError::UnexpectedReply`].

use super::call::{MountUpload, Mounted};
use super::connection::Client;
use super::error::ClientError;
use crate::wire::TaskInfo;
use crate::wire::{
    DirEntry, ErrorCode, ErrorReply, Event, FileData, MountSize, Reply, RequestBody, RunReply,
    RunRequest, SessionInfo, Stats, MAX_CHUNK_BYTES,
};

fn owned(tenant: Option<&str>) -> Option<String> {
    tenant.map(str::to_owned)
}

fn task(reply: Reply) -> Result<TaskInfo, ClientError> {
    match reply {
        Reply::Task(t) => Ok(t),
        other => Err(ClientError::unexpected(other)),
    }
}

impl Client {
    /// A new session (workspace) for `tenant`.
    pub async fn open_session(&self, tenant: Option<&str>) -> Result<SessionInfo, ClientError> {
        let body = RequestBody::OpenSession {
            tenant: owned(tenant),
        };
        match self.request(body).await? {
            Reply::Session(s) => Ok(s),
            other => Err(ClientError::unexpected(other)),
        }
    }

    pub async fn session_info(
        &self,
        session_id: &str,
        tenant: Option<&str>,
    ) -> Result<SessionInfo, ClientError> {
        let body = RequestBody::SessionInfo {
            session_id: session_id.to_owned(),
            tenant: owned(tenant),
        };
        match self.request(body).await? {
            Reply::Session(s) => Ok(s),
            other => Err(ClientError::unexpected(other)),
        }
    }

    pub async fn close_session(
        &self,
        session_id: &str,
        tenant: Option<&str>,
    ) -> Result<(), ClientError> {
        let body = RequestBody::CloseSession {
            session_id: session_id.to_owned(),
            tenant: owned(tenant),
        };
        match self.request(body).await? {
            Reply::Closed => Ok(()),
            other => Err(ClientError::unexpected(other)),
        }
    }

    /// The entries of a directory, `path` relative to the workspace root.
    pub async fn list_dir(
        &self,
        session_id: &str,
        tenant: Option<&str>,
        path: &str,
    ) -> Result<Vec<DirEntry>, ClientError> {
        let body = RequestBody::ListDir {
            session_id: session_id.to_owned(),
            tenant: owned(tenant),
            path: path.to_owned(),
        };
        match self.request(body).await? {
            Reply::Dir { entries } => Ok(entries),
            other => Err(ClientError::unexpected(other)),
        }
    }

    /// A page of the session's recorded runs, from run number `from`.
    pub async fn history(
        &self,
        session_id: &str,
        tenant: Option<&str>,
        from: u64,
    ) -> Result<crate::history::HistoryPage, ClientError> {
        let body = RequestBody::History {
            session_id: session_id.to_owned(),
            tenant: owned(tenant),
            from,
        };
        match self.request(body).await? {
            Reply::History(p) => Ok(p),
            other => Err(ClientError::unexpected(other)),
        }
    }

    /// Up to `limit` bytes (at most one frame's worth) of a file, from `offset`.
    pub async fn read_file(
        &self,
        session_id: &str,
        tenant: Option<&str>,
        path: &str,
        offset: u64,
        limit: u64,
    ) -> Result<FileData, ClientError> {
        let body = RequestBody::ReadFile {
            session_id: session_id.to_owned(),
            tenant: owned(tenant),
            path: path.to_owned(),
            offset,
            limit,
        };
        match self.request(body).await? {
            Reply::File(f) => Ok(f),
            other => Err(ClientError::unexpected(other)),
        }
    }

    /// A whole file, read chunk by chunk; refused with `Quota` when it is
    /// larger than `max`.
    pub async fn read_all(
        &self,
        session_id: &str,
        tenant: Option<&str>,
        path: &str,
        max: u64,
    ) -> Result<Vec<u8>, ClientError> {
        let chunk = MAX_CHUNK_BYTES as u64;
        let read = |offset, limit| self.read_file(session_id, tenant, path, offset, limit);
        let first = read(0, chunk.min(max)).await?;
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
            let next = read(data.len() as u64, chunk).await?;
            if next.data.is_empty() {
                break;
            }
            data.extend_from_slice(&next.data);
            eof = next.eof;
        }
        data.truncate(max as usize);
        Ok(data)
    }

    pub async fn stats(&self) -> Result<Stats, ClientError> {
        match self.request(RequestBody::Stats).await? {
            Reply::Stats(s) => Ok(s),
            other => Err(ClientError::unexpected(other)),
        }
    }

    /// Stop opening sessions (root only): the node drains for a restart.
    pub async fn drain(&self) -> Result<Stats, ClientError> {
        match self.request(RequestBody::Drain).await? {
            Reply::Stats(s) => Ok(s),
            other => Err(ClientError::unexpected(other)),
        }
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
            other => Err(ClientError::unexpected(other)),
        }
    }

    /// Start `req` as a task the supervisor owns; answers once it is
    /// registered, before the run starts.
    pub async fn start_task(
        &self,
        req: RunRequest,
        ttl_ms: Option<u64>,
    ) -> Result<TaskInfo, ClientError> {
        let body = RequestBody::StartTask { run: req, ttl_ms };
        task(self.request(body).await?)
    }

    pub async fn get_task(
        &self,
        task_id: &str,
        tenant: Option<&str>,
    ) -> Result<TaskInfo, ClientError> {
        let body = RequestBody::GetTask {
            task_id: task_id.to_owned(),
            tenant: owned(tenant),
        };
        task(self.request(body).await?)
    }

    /// Kill a working task's run; answers with the task as it now is.
    pub async fn cancel_task(
        &self,
        task_id: &str,
        tenant: Option<&str>,
    ) -> Result<TaskInfo, ClientError> {
        let body = RequestBody::CancelTask {
            task_id: task_id.to_owned(),
            tenant: owned(tenant),
        };
        task(self.request(body).await?)
    }

    /// Cancel request `id` of this connection; waits for the supervisor to acknowledge.
    pub async fn cancel(&self, id: u64) -> Result<(), ClientError> {
        match self.request(RequestBody::Cancel { target: id }).await? {
            Reply::Cancelled => Ok(()),
            other => Err(ClientError::unexpected(other)),
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

    /// Start an upload of `size` bytes to `mounts/<path>`, whose data is
    /// sent piecewise.
    pub async fn start_mount(
        &self,
        session_id: &str,
        tenant: Option<&str>,
        path: &str,
        size: MountSize,
    ) -> Result<MountUpload, ClientError> {
        let body = RequestBody::WriteMount {
            session_id: session_id.to_owned(),
            tenant: owned(tenant),
            path: path.to_owned(),
            size,
        };
        let call = self.start(body).await?;
        Ok(MountUpload::new(call, size))
    }
}
