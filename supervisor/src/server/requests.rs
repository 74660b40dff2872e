//! The requests in flight on one connection: start each in its own task,
//! answer `Cancel` here, and route `MountChunk` data and `MountEnd` to
//! their upload.

use super::events::EventSink;
use super::handler::{Ctx, Handler};
use super::peer::Peer;
use futures::FutureExt;
use prims_protocol::wire::{
    ErrorCode, ErrorReply, MountSize, Reply, Request, RequestBody, Response, ResponseBody,
};
use std::collections::{HashMap, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Chunks buffered per upload; a client sending faster than the handler
/// writes is paced by this.
const CHUNK_QUEUE: usize = 4;
/// Finished uploads remembered so that their late chunks are not mistaken
/// for a protocol error.
const DRAINED_MAX: usize = 64;

pub(super) struct Requests<H> {
    table: Arc<Mutex<Table>>,
    peer: Peer,
    handler: Arc<H>,
    max: usize,
    tx: mpsc::Sender<Response>,
    token: CancellationToken,
    tracker: TaskTracker,
}

#[derive(Default)]
struct Table {
    live: HashMap<u64, Live>,
    /// (id, bytes still allowed) of uploads that ended before all their data
    /// arrived: chunks (and a `MountEnd`) already on the wire are dropped,
    /// not fatal.
    drained: VecDeque<(u64, u64)>,
}

struct Live {
    cancel: CancellationToken,
    upload: Option<Upload>,
}

struct Upload {
    /// Dropped once the upload is complete (the exact size arrived, or
    /// `MountEnd` for an open-ended one), ending the handler's stream.
    tx: Option<mpsc::Sender<Vec<u8>>>,
    /// Bytes still allowed: the rest of the exact size, or of the maximum.
    remaining: u64,
    /// An open-ended upload (`MountSize::AtMost`) whose `MountEnd` has not
    /// arrived: only that completes it.
    awaiting_end: bool,
}

impl Live {
    /// Cancel, and end the upload stream so a handler waiting on it wakes.
    fn end(&mut self) {
        self.cancel.cancel();
        if let Some(up) = self.upload.as_mut() {
            up.tx = None;
        }
    }
}

impl Table {
    fn finish(&mut self, id: u64) {
        let Some(live) = self.live.remove(&id) else {
            return;
        };
        if let Some(up) = live.upload.filter(|u| u.remaining > 0 || u.awaiting_end) {
            if self.drained.len() == DRAINED_MAX {
                self.drained.pop_front();
            }
            self.drained.push_back((id, up.remaining));
        }
    }
}

fn error(code: ErrorCode, message: String) -> ResponseBody {
    ResponseBody::Error(ErrorReply { code, message })
}

impl<H: Handler> Requests<H> {
    pub(super) fn new(
        peer: Peer,
        handler: Arc<H>,
        max: usize,
        tx: mpsc::Sender<Response>,
        token: CancellationToken,
        tracker: TaskTracker,
    ) -> Self {
        Requests {
            table: Default::default(),
            peer,
            handler,
            max,
            tx,
            token,
            tracker,
        }
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Handle one request frame. An `Err` is a protocol violation that ends
    /// the connection.
    pub(super) async fn dispatch(&self, req: Request) -> Result<(), String> {
        let answer = match req.body {
            RequestBody::MountChunk { target, data } => return self.chunk(target, data).await,
            RequestBody::MountEnd { target } => return self.end_upload(target),
            RequestBody::Cancel { target } => Some(self.cancel(req.id, target)),
            body => self.start(req.id, body),
        };
        if let Some(body) = answer {
            let _ = self.tx.send(Response { id: req.id, body }).await;
        }
        Ok(())
    }

    /// The connection is gone: end every request still in flight.
    pub(super) fn close(&self) {
        self.table().live.values_mut().for_each(Live::end);
    }

    /// Why a new request may not take `id`, if it may not.
    fn refuse_id(&self, table: &Table, id: u64) -> Option<ResponseBody> {
        if id == 0 {
            return Some(error(
                ErrorCode::BadRequest,
                "request id 0 is reserved".into(),
            ));
        }
        if table.live.contains_key(&id) {
            let msg = format!("request id {id} is already in flight");
            return Some(error(ErrorCode::BadRequest, msg));
        }
        None
    }

    fn cancel(&self, id: u64, target: u64) -> ResponseBody {
        let mut table = self.table();
        if let Some(refusal) = self.refuse_id(&table, id) {
            return refusal;
        }
        match table.live.get_mut(&target) {
            Some(live) => {
                live.end();
                ResponseBody::Reply(Reply::Cancelled)
            }
            None => error(
                ErrorCode::NotFound,
                format!("no request {target} in flight on this connection"),
            ),
        }
    }

    /// Spawn the handler for a request; returns an immediate answer if refused.
    fn start(&self, id: u64, body: RequestBody) -> Option<ResponseBody> {
        let mut table = self.table();
        if let Some(refusal) = self.refuse_id(&table, id) {
            return Some(refusal);
        }
        if table.live.len() >= self.max {
            let msg = format!(
                "{} requests are already in flight on this connection",
                self.max
            );
            return Some(error(ErrorCode::Busy, msg));
        }
        let cancel = self.token.child_token();
        let (upload, chunks) = match &body {
            RequestBody::WriteMount { size, .. } => {
                let (tx, rx) = mpsc::channel(CHUNK_QUEUE);
                let (remaining, awaiting_end) = match *size {
                    MountSize::Exact(n) => (n, false),
                    MountSize::AtMost(n) => (n, true),
                };
                // An empty exact upload is complete before any chunk.
                let tx = (awaiting_end || remaining > 0).then_some(tx);
                let upload = Upload {
                    tx,
                    remaining,
                    awaiting_end,
                };
                (Some(upload), Some(rx))
            }
            _ => (None, None),
        };
        // A reused id makes old chunks indistinguishable from new ones.
        table.drained.retain(|(d, _)| *d != id);
        table.live.insert(
            id,
            Live {
                cancel: cancel.clone(),
                upload,
            },
        );
        drop(table);

        let events = EventSink::new(id, self.tx.clone(), cancel.clone());
        let ctx = Ctx {
            peer: self.peer,
            events: events.clone(),
            cancel,
            chunks,
        };
        let (handler, table, tx, pid) = (
            self.handler.clone(),
            self.table.clone(),
            self.tx.clone(),
            self.peer.pid,
        );
        self.tracker.spawn(async move {
            let result = AssertUnwindSafe(handler.handle(body, ctx))
                .catch_unwind()
                .await
                .unwrap_or_else(|_| {
                    tracing::error!(pid, id, "request handler panicked");
                    Err(ErrorReply {
                        code: ErrorCode::Internal,
                        message: "the request failed unexpectedly".into(),
                    })
                });
            // Out of the table first, so the client may reuse the id as soon as it sees the reply.
            table.lock().unwrap_or_else(|e| e.into_inner()).finish(id);
            events.finish();
            let body = match result {
                Ok(reply) => ResponseBody::Reply(reply),
                Err(e) => ResponseBody::Error(e),
            };
            let _ = tx.send(Response { id, body }).await;
        });
        None
    }

    /// Complete an open-ended upload: the handler's stream ends without its
    /// request being cancelled, which is how it knows the file is whole.
    fn end_upload(&self, target: u64) -> Result<(), String> {
        let mut table = self.table();
        if let Some(live) = table.live.get_mut(&target) {
            let up = live
                .upload
                .as_mut()
                .filter(|u| u.awaiting_end)
                .ok_or_else(|| {
                    format!(
                        "mount_end for request {target}, which is not an open-ended \
                         write_mount still waiting for its end"
                    )
                })?;
            up.awaiting_end = false;
            // Nothing may follow the end.
            up.remaining = 0;
            up.tx = None;
        } else if let Some(i) = table.drained.iter().position(|(d, _)| *d == target) {
            table.drained.remove(i);
        } else {
            return Err(format!("mount_end for unknown request {target}"));
        }
        Ok(())
    }

    /// Route upload data to its request, pacing the reader on the handler.
    async fn chunk(&self, target: u64, data: Vec<u8>) -> Result<(), String> {
        let len = data.len() as u64;
        let too_much =
            || format!("mount_chunk data for request {target} exceeds its announced size");
        let tx = {
            let mut table = self.table();
            if let Some(live) = table.live.get_mut(&target) {
                let up = live.upload.as_mut().ok_or_else(|| {
                    format!("mount_chunk for request {target}, which is not a write_mount")
                })?;
                up.remaining = up.remaining.checked_sub(len).ok_or_else(too_much)?;
                if up.remaining == 0 && !up.awaiting_end {
                    up.tx.take()
                } else {
                    up.tx.clone()
                }
            } else if let Some((_, left)) = table.drained.iter_mut().find(|(d, _)| *d == target) {
                *left = left.checked_sub(len).ok_or_else(too_much)?;
                None
            } else {
                return Err(format!("mount_chunk for unknown request {target}"));
            }
        };
        if let Some(tx) = tx {
            // A handler that stopped reading has given up; the rest is dropped.
            let _ = tx.send(data).await;
        }
        Ok(())
    }
}
