//! `start_task`: a run the supervisor owns, detached from the connection
//! that asked for it, so that a dropped connection or a restarted
//! front-end loses nothing. The result waits in [`crate::tasks::Tasks`].

use super::replies::internal;
use super::run;
use super::state::Daemon;
use crate::server::Ctx;
use prims_protocol::wire::{ErrorReply, Reply, RunRequest};
use std::sync::Arc;

pub(super) async fn start(
    d: &Arc<Daemon>,
    req: RunRequest,
    ttl_ms: Option<u64>,
    ctx: Ctx,
) -> Result<Reply, ErrorReply> {
    // A task for a session that is not there would only fail later.
    d.session(req.session_id.clone(), req.tenant.clone())
        .await?;
    let (info, cancel) = d
        .tasks
        .create(&req.session_id, req.tenant.as_deref(), ttl_ms)?;
    let detached = Ctx::detached(ctx.peer, cancel);
    let (d, id) = (d.clone(), info.task_id.clone());
    tokio::spawn(async move {
        let result = match run::run(&d, req, detached).await {
            Ok(Reply::Run(r)) => Ok(r),
            Ok(other) => Err(internal(format!("a run replied {other:?}"))),
            Err(e) => Err(e),
        };
        d.tasks.finish(&id, result);
    });
    tracing::info!(task = %info.task_id, "task started");
    Ok(Reply::Task(info))
}
