//! One request in flight, and uploads built on it.

use super::error::ClientError;
use super::shared::Shared;
use crate::frame;
use crate::wire::{
    ErrorReply, Event, MountSize, Reply, Request, RequestBody, ResponseBody, MAX_CHUNK_BYTES,
};
use std::sync::Arc;
use tokio::sync::mpsc;

/// What a finished [`super::Client::write_mount`] reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mounted {
    /// Relative to the workspace root.
    pub path: String,
    pub bytes: u64,
}

/// One request in flight: its events, then its reply. Dropping an
/// unfinished call asks the supervisor to cancel it.
pub struct Call {
    id: u64,
    rx: mpsc::UnboundedReceiver<ResponseBody>,
    outcome: Option<Result<Reply, ErrorReply>>,
    /// The reply arrived or the connection died: nothing left to cancel.
    done: bool,
    shared: Arc<Shared>,
}

impl Call {
    pub(super) fn new(
        id: u64,
        rx: mpsc::UnboundedReceiver<ResponseBody>,
        shared: Arc<Shared>,
    ) -> Call {
        Call {
            id,
            rx,
            outcome: None,
            done: false,
            shared,
        }
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    /// The next event, or `None` once the reply has arrived.
    pub async fn next_event(&mut self) -> Result<Option<Event>, ClientError> {
        if self.done {
            return Ok(None);
        }
        match self.rx.recv().await {
            Some(body) => Ok(self.take(body)),
            None => {
                self.done = true;
                Err(ClientError::Disconnected)
            }
        }
    }

    fn take(&mut self, body: ResponseBody) -> Option<Event> {
        match body {
            ResponseBody::Event(e) => return Some(e),
            ResponseBody::Reply(r) => self.outcome = Some(Ok(r)),
            ResponseBody::Error(e) => self.outcome = Some(Err(e)),
        }
        self.done = true;
        None
    }

    /// Wait for the reply, discarding the remaining events.
    pub async fn finish(mut self) -> Result<Reply, ClientError> {
        while self.next_event().await?.is_some() {}
        match self.outcome.take() {
            Some(Ok(reply)) => Ok(reply),
            Some(Err(e)) => Err(ClientError::Server(e)),
            None => Err(ClientError::Disconnected),
        }
    }

    /// Ask the supervisor to cancel this call; its reply still arrives.
    pub async fn cancel(&self) -> Result<(), ClientError> {
        let client_id = self.shared.next_id();
        let req = Request {
            id: client_id,
            body: RequestBody::Cancel { target: self.id },
        };
        // The acknowledgement has no pending entry and is dropped by the reader.
        self.shared.send(&req).await
    }

    /// The reply if it already arrived, without waiting.
    fn poll_outcome(&mut self) -> Option<&Result<Reply, ErrorReply>> {
        while !self.done {
            let body = self.rx.try_recv().ok()?;
            self.take(body);
        }
        self.outcome.as_ref()
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        let removed = self
            .shared
            .pending()
            .as_mut()
            .and_then(|m| m.remove(&self.id));
        if self.done || removed.is_none() {
            return;
        }
        let req = Request {
            id: self.shared.next_id(),
            body: RequestBody::Cancel { target: self.id },
        };
        if let Ok(frame) = frame::encode(&req) {
            if let Err(mpsc::error::TrySendError::Full(frame)) = self.shared.frames.try_send(frame)
            {
                let frames = self.shared.frames.clone();
                if let Ok(rt) = tokio::runtime::Handle::try_current() {
                    rt.spawn(async move { frames.send(frame).await });
                }
            }
        }
    }
}

/// An upload started by [`super::Client::start_mount`]. Dropping it
/// unfinished cancels it; [`MountUpload::abort`] also waits until the
/// supervisor has discarded what it wrote.
pub struct MountUpload {
    call: Call,
    size: MountSize,
    sent: u64,
}

impl MountUpload {
    pub(super) fn new(call: Call, size: MountSize) -> MountUpload {
        MountUpload {
            call,
            size,
            sent: 0,
        }
    }

    /// Send the next piece of the file, split into frames of at most
    /// `MAX_CHUNK_BYTES`. Stops early if the supervisor already gave up.
    pub async fn send(&mut self, data: &[u8]) -> Result<(), ClientError> {
        let total = self.sent.saturating_add(data.len() as u64);
        if total > self.size.limit() {
            return Err(ClientError::Usage(match self.size {
                MountSize::Exact(_) => "more data than the announced size",
                MountSize::AtMost(_) => "more data than the announced maximum",
            }));
        }
        for piece in data.chunks(MAX_CHUNK_BYTES) {
            self.check_alive()?;
            let body = RequestBody::MountChunk {
                target: self.call.id,
                data: piece.to_vec(),
            };
            self.call
                .shared
                .send(&Request {
                    id: self.call.id,
                    body,
                })
                .await?;
            self.sent += piece.len() as u64;
        }
        Ok(())
    }

    /// The supervisor's error, if it already ended the upload with one.
    fn check_alive(&mut self) -> Result<(), ClientError> {
        match self.call.poll_outcome() {
            Some(Err(e)) => Err(ClientError::Server(e.clone())),
            _ => Ok(()),
        }
    }

    /// Wait for the supervisor to confirm the file. An open-ended upload is
    /// ended here with `mount_end`.
    pub async fn finish(mut self) -> Result<Mounted, ClientError> {
        match self.size {
            MountSize::Exact(n) if self.sent != n => {
                return Err(ClientError::Usage(
                    "upload finished before its announced size",
                ));
            }
            MountSize::Exact(_) => {}
            MountSize::AtMost(_) => {
                self.check_alive()?;
                let req = Request {
                    id: self.call.id,
                    body: RequestBody::MountEnd {
                        target: self.call.id,
                    },
                };
                self.call.shared.send(&req).await?;
            }
        }
        match self.call.finish().await? {
            Reply::Mounted { path, bytes } => Ok(Mounted { path, bytes }),
            other => Err(ClientError::unexpected(other)),
        }
    }

    /// Give the upload up and wait until the supervisor has answered, so
    /// its temporary file is gone when this returns. An upload that never
    /// reached its end is never kept: the answer is `Cancelled`, or an error
    /// the supervisor had already hit (quota, a bad path). Fails with
    /// `UnexpectedReply` if the upload had in fact completed and was kept.
    pub async fn abort(mut self) -> Result<(), ClientError> {
        if self.call.poll_outcome().is_none() {
            self.call.cancel().await?;
        }
        match self.call.finish().await {
            Ok(reply) => Err(ClientError::unexpected(reply)),
            Err(ClientError::Server(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }
}
