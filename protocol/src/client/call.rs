//! One request in flight, and uploads built on it.

use super::{ClientError, Inner};
use crate::frame;
use crate::wire::{ErrorReply, Event, Reply, Request, RequestBody, ResponseBody, MAX_CHUNK_BYTES};
use std::sync::atomic::Ordering;
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
    inner: Arc<Inner>,
}

impl Call {
    pub(super) fn new(
        id: u64,
        rx: mpsc::UnboundedReceiver<ResponseBody>,
        inner: Arc<Inner>,
    ) -> Call {
        Call {
            id,
            rx,
            outcome: None,
            done: false,
            inner,
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
        let client_id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let req = Request {
            id: client_id,
            body: RequestBody::Cancel { target: self.id },
        };
        // The acknowledgement has no pending entry and is dropped by the reader.
        self.inner.send(&req).await
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
            .inner
            .pending()
            .as_mut()
            .and_then(|m| m.remove(&self.id));
        if self.done || removed.is_none() {
            return;
        }
        let req = Request {
            id: self.inner.next_id.fetch_add(1, Ordering::Relaxed),
            body: RequestBody::Cancel { target: self.id },
        };
        if let Ok(frame) = frame::encode(&req) {
            if let Err(mpsc::error::TrySendError::Full(frame)) = self.inner.frames.try_send(frame) {
                let frames = self.inner.frames.clone();
                if let Ok(rt) = tokio::runtime::Handle::try_current() {
                    rt.spawn(async move { frames.send(frame).await });
                }
            }
        }
    }
}

/// An upload started by [`super::Client::start_mount`].
pub struct MountUpload {
    call: Call,
    remaining: u64,
}

impl MountUpload {
    pub(super) fn new(call: Call, size: u64) -> MountUpload {
        MountUpload {
            call,
            remaining: size,
        }
    }

    /// Send the next piece of the file, split into frames of at most
    /// `MAX_CHUNK_BYTES`. Stops early if the supervisor already gave up.
    pub async fn send(&mut self, data: &[u8]) -> Result<(), ClientError> {
        if data.len() as u64 > self.remaining {
            return Err(ClientError::Usage("more data than the announced size"));
        }
        for piece in data.chunks(MAX_CHUNK_BYTES) {
            if let Some(Err(e)) = self.call.poll_outcome() {
                return Err(ClientError::Server(e.clone()));
            }
            let body = RequestBody::MountChunk {
                target: self.call.id,
                data: piece.to_vec(),
            };
            self.call
                .inner
                .send(&Request {
                    id: self.call.id,
                    body,
                })
                .await?;
            self.remaining -= piece.len() as u64;
        }
        Ok(())
    }

    /// Wait for the supervisor to confirm the file.
    pub async fn finish(self) -> Result<Mounted, ClientError> {
        if self.remaining > 0 {
            return Err(ClientError::Usage(
                "upload finished before its announced size",
            ));
        }
        match self.call.finish().await? {
            Reply::Mounted { path, bytes } => Ok(Mounted { path, bytes }),
            other => Err(ClientError::UnexpectedReply(Box::new(other))),
        }
    }
}
