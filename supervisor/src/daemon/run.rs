//! One `run` request: session lock, environment, a scheduler slot, the
//! jail, then the files the run wrote.

use super::scheduler::cancelled;
use super::{internal, Daemon};
use crate::audit::{now_secs, sha256_hex, RunRecord};
use crate::runner::{self, Cancel, Stream};
use crate::server::Ctx;
use crate::spec::{self, Placement};
use prims_protocol::jail::Status;
use prims_protocol::wire::{
    ErrorCode, ErrorReply, Event, MountSize, OutputStream, Reply, RunReply, RunRequest,
};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Code larger than this is refused before anything else happens.
const MAX_CODE_BYTES: usize = 1 << 20;

pub async fn run(d: &Arc<Daemon>, req: RunRequest, ctx: Ctx) -> Result<Reply, ErrorReply> {
    if req.code.len() > MAX_CODE_BYTES {
        return Err(super::bad_request(format!(
            "code is {} bytes; the limit is {MAX_CODE_BYTES}",
            req.code.len()
        )));
    }
    let requirements =
        crate::envs::validate_requirements(&req.requirements).map_err(|e| e.to_reply())?;
    let sessions = d.sessions.clone();
    let (id, tenant) = (req.session_id.clone(), req.tenant.clone());
    let session = d
        .blocking(move || {
            sessions
                .get(&id, tenant.as_deref())
                .map_err(|e| e.to_reply())
        })
        .await?;

    // Runs in one session are serialized; sessions run in parallel.
    let _turn = tokio::select! {
        g = session.run_lock.lock() => g,
        _ = ctx.cancel.cancelled() => return Err(cancelled()),
    };
    let events = ctx.events.clone();
    let progress = move |message: String| events.try_send(Event::Building { message });
    let lease = tokio::select! {
        l = d.envs.ensure(&requirements, &progress) => l.map_err(|e| e.to_reply())?,
        _ = ctx.cancel.cancelled() => return Err(cancelled()),
    };
    let events = ctx.events.clone();
    let _slot = d
        .scheduler
        .admit(&ctx.cancel, |position| {
            events.try_send(Event::Queued { position });
        })
        .await?;

    let policy = d.policy();
    let job = format!(
        "{}{}-{}",
        super::startup::JOB_PREFIX,
        &session.name[..8],
        d.jobs.fetch_add(1, Ordering::Relaxed)
    );
    let spec = spec::build(
        &policy,
        req.code.clone(),
        &req.limits,
        Placement {
            interpreter: d.interpreter.clone(),
            venv: lease.dir.clone(),
            workspace: session.workspace.clone(),
            host_uid: session.host_uid,
            cgroup: d.parents.spec_for(&job),
        },
    );

    let (sessions, s, ws) = (
        d.sessions.clone(),
        session.clone(),
        session.workspace.clone(),
    );
    let before = d
        .blocking(move || {
            sessions.run_started(&s).map_err(|e| e.to_reply())?;
            crate::fsops::snapshot_output(&ws).map_err(|e| e.to_reply())
        })
        .await?;
    ctx.events.send(Event::Started).await;

    let cancel = Cancel::default();
    let watcher = {
        let (token, cancel) = (ctx.cancel.clone(), cancel.clone());
        tokio::spawn(async move {
            token.cancelled().await;
            cancel.cancel();
        })
    };
    let (jailer, events, run_cancel) = (d.jailer.clone(), ctx.events.clone(), cancel.clone());
    let result = tokio::task::spawn_blocking(move || {
        let sink = |s: Stream, bytes: &[u8]| {
            let stream = match s {
                Stream::Stdout => OutputStream::Stdout,
                Stream::Stderr => OutputStream::Stderr,
            };
            events.blocking_send(Event::Output {
                stream,
                data: bytes.to_vec(),
            });
        };
        runner::run_job(&jailer, &spec, &sink, &run_cancel)
    })
    .await;
    watcher.abort();

    let (sessions, s, ws) = (
        d.sessions.clone(),
        session.clone(),
        session.workspace.clone(),
    );
    let after = d
        .blocking(move || {
            sessions.run_finished(&s);
            sessions.touch(&s);
            crate::fsops::snapshot_output(&ws).map_err(|e| e.to_reply())
        })
        .await;
    let result = result
        .map_err(|e| internal(format!("run worker failed: {e}")))?
        .map_err(|e| internal(format!("{e}")))?;
    if result.outcome.status == Status::SetupError || result.cancelled {
        // A killed jailer leaves its job cgroup behind.
        let _ = crate::cgroups::remove_job(&d.parents, &job);
    }
    d.audit.record(&RunRecord {
        time: now_secs(),
        session: &session.name,
        tenant: session.tenant.as_deref(),
        code_sha256: sha256_hex(&req.code),
        requirements: &requirements,
        env: &lease.key,
        outcome: &result.outcome,
        cancelled: result.cancelled,
    });
    if result.cancelled {
        return Err(cancelled());
    }
    let files = crate::fsops::diff(&before, &after?);
    Ok(Reply::Run(RunReply {
        outcome: result.outcome,
        stdout: result.stdout,
        stderr: result.stderr,
        stdout_truncated: result.stdout_truncated,
        stderr_truncated: result.stderr_truncated,
        files,
        env_built: lease.built,
    }))
}

/// Streams an upload to `mounts/<path>`: the connection paces the client on
/// this handler, and only a bounded queue of chunks is held in memory.
pub async fn write_mount(
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
    let sessions = d.sessions.clone();
    let session = d
        .blocking(move || {
            sessions
                .get(&session_id, tenant.as_deref())
                .map_err(|e| e.to_reply())
        })
        .await?;
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
