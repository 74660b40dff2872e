//! One `write_mount` request: an upload streamed into a session's
//! `mounts/`.

use super::replies::internal;
use super::state::Daemon;
use crate::server::Ctx;
use prims_protocol::wire::{ErrorCode, ErrorReply, MountSize, Reply};
use std::sync::Arc;

/// Streams an upload to `mounts/<path>`: the connection paces the client on
/// this handler, and only a bounded queue of chunks is held in memory.
pub(super) async fn write_mount(
    d: &Arc<Daemon>,
    session_id: String,
    tenant: Option<String>,
    path: String,
    size: MountSize,
    mut ctx: Ctx,
) -> Result<Reply, ErrorReply> {
    let Some(mut chunks) = ctx.chunks.take() else {
        return Err(internal("write_mount without a chunk channel"));
    };
    let session = d.session(session_id, tenant).await?;
    // Bridge the async chunk stream into the blocking writer.
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(4);
    let feeder = tokio::spawn(async move {
        while let Some(chunk) = chunks.recv().await {
            if tx.send(chunk).is_err() {
                break;
            }
        }
    });
    let (ws, uid, rel) = (session.workspace.clone(), session.host_uid, path.clone());
    let cancel = ctx.cancel.clone();
    let written = d
        .blocking(move || {
            let written = match size {
                MountSize::Exact(n) => crate::fsops::write_mount(&ws, &rel, n, rx, uid),
                // The stream ends early only after a cancel (see `Ctx::chunks`).
                MountSize::AtMost(max) => {
                    crate::fsops::write_mount_up_to(&ws, &rel, max, rx, uid, || {
                        !cancel.is_cancelled()
                    })
                }
            };
            written.map_err(|e| e.to_reply())
        })
        .await;
    feeder.abort();
    let bytes = written?;
    if ctx.cancel.is_cancelled() {
        return Err(ErrorReply {
            code: ErrorCode::Cancelled,
            message: "the upload was cancelled".into(),
        });
    }
    Ok(Reply::Mounted {
        path: format!("mounts/{path}"),
        bytes,
    })
}
