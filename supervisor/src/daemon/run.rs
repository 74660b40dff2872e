//! One `run` request, in phases: check the request, find the session and
//! take its turn, lease the environment, wait for a scheduler slot, run the
//! code in the session's live interpreter, then report the files the run
//! wrote, audit it and add it to the session's history.

use super::pip;
use super::replies::{bad_request, internal, stopping};
use super::requirements::{merged, plan, Plan};
use super::scheduler::{cancelled, RunClass};
use super::state::Daemon;
use crate::audit::{now_secs, sha256_hex, RunRecord};
use crate::egress::{call_rules, NetCall};
use crate::envs::{Added, EnvLease};
use crate::fsops::Snapshot;
use crate::interpreters::install::Installer;
use crate::interpreters::{IpythonFrom, LiveCall, LiveRun, SessionRequirements};
use crate::job::Stream;
use crate::server::Ctx;
use crate::sessions::Session;
use prims_protocol::wire::{
    ErrorReply, Event, OutputStream, Reply, ResetReason, RunReply, RunRequest,
};
use std::future::Future;
use std::sync::{Arc, Mutex};

/// Code larger than this is refused before anything else happens.
const MAX_CODE_BYTES: usize = 1 << 20;

pub(super) async fn run(d: &Arc<Daemon>, req: RunRequest, ctx: Ctx) -> Result<Reply, ErrorReply> {
    let _flight = InFlight::new(d);
    if d.stopping.is_cancelled() {
        return Err(stopping());
    }
    // Until its cell starts, a call the stop finds waiting (for its turn,
    // an environment, a slot) gives up; a running cell is interrupted
    // instead, as at a time limit (`cell::Ends`), and answers for itself.
    let waiting = ctx.cancel.child_token();
    let _link = stop_link(d, &waiting);
    let ctx = Ctx {
        cancel: waiting,
        ..ctx
    };
    // Whatever ended a call that did not run to its answer once the stop
    // began, the stop is the reason.
    let stopped = |e: ErrorReply| {
        if d.stopping.is_cancelled() {
            stopping()
        } else {
            e
        }
    };
    run_call(d, req, ctx).await.map_err(stopped)
}

/// Counts a `run` request from its start to its answer.
struct InFlight<'a>(&'a Daemon);

impl<'a> InFlight<'a> {
    fn new(d: &'a Daemon) -> Self {
        d.runs_in_flight
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        InFlight(d)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0
            .runs_in_flight
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Cancels `waiting` when the server starts to stop; the guard ends the
/// watch.
fn stop_link(
    d: &Daemon,
    waiting: &tokio_util::sync::CancellationToken,
) -> tokio_util::sync::DropGuard {
    let (stop, w, done) = (
        d.stopping.clone(),
        waiting.clone(),
        tokio_util::sync::CancellationToken::new(),
    );
    let ended = done.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = stop.cancelled() => w.cancel(),
            _ = ended.cancelled() => {}
        }
    });
    done.drop_guard()
}

async fn run_call(d: &Arc<Daemon>, req: RunRequest, ctx: Ctx) -> Result<Reply, ErrorReply> {
    let requirements = check(&req)?;
    let policy = d.policy();
    let net = call_rules(&policy, req.tenant.as_deref(), req.network.as_deref())?;
    let session = d
        .session(req.session_id.clone(), req.tenant.clone())
        .await?;
    let net = net.map(|n| {
        n.with_secrets(&policy, session.tenant.as_deref(), |secret| {
            d.sessions.placeholder(&session, secret)
        })
    });
    // Runs in one session are serialized; sessions run in parallel.
    let _turn = unless_cancelled(&ctx, session.run_lock.lock()).await?;
    let events = ctx.events.clone();
    let progress = move |message: String| events.try_send(Event::Building { message });
    let had = d.interpreters.requirements(&session);
    let (lease, session_reqs, env_change, installed) = match plan(had, &requirements) {
        Plan::Base(reqs) => {
            let lease = ensure(d, &ctx, &reqs, &progress).await?;
            let now = SessionRequirements {
                base: reqs.clone(),
                all: reqs,
            };
            (lease, now, None, Vec::new())
        }
        Plan::Keep(had) => (
            ensure(d, &ctx, &had.base, &progress).await?,
            had,
            None,
            Vec::new(),
        ),
        Plan::Add { had, missing } => {
            let lease = ensure(d, &ctx, &had.base, &progress).await?;
            progress(format!(
                "installing into the session: {}",
                missing.join(" ")
            ));
            let added = pip::install(
                d.clone(),
                session.clone(),
                lease.dir.clone(),
                missing.clone(),
                progress.clone(),
            );
            // A call cancelled meanwhile drops the install, which stops its
            // jail (pip's drop guard).
            match unless_cancelled(&ctx, added)
                .await?
                .map_err(|e| e.to_reply())?
            {
                Added::Installed(added) => {
                    let all = merged(&had.all, &missing);
                    let now = SessionRequirements {
                        base: had.base,
                        all,
                    };
                    (lease, now, None, added)
                }
                Added::Conflict(c) => {
                    drop(lease);
                    let all = merged(&had.all, &missing);
                    progress(format!(
                        "{}: a new environment replaces the session's",
                        c.message()
                    ));
                    let lease = ensure(d, &ctx, &all, &progress).await?;
                    let now = SessionRequirements {
                        base: all.clone(),
                        all,
                    };
                    let why = (ResetReason::RequirementsConflict, c.message());
                    (lease, now, Some(why), Vec::new())
                }
            }
        }
    };
    let events = ctx.events.clone();
    let class = if req.fresh {
        RunClass::Batch
    } else {
        RunClass::Interactive
    };
    let _slot = d
        .scheduler
        .admit(class, &ctx.cancel, |position| {
            events.try_send(Event::Queued { position });
        })
        .await?;

    let (before, last_run_lost) = begin(d, &session).await?;
    ctx.events.send(Event::Started).await;
    let (env, env_built) = (lease.key.clone(), lease.built);
    let pip_added = Arc::new(Mutex::new(Vec::new()));
    let installer = pip::installer(
        d.clone(),
        session.clone(),
        lease.dir.clone(),
        session_reqs.all.clone(),
        pip_added.clone(),
    );
    let result = execute(
        d,
        &session,
        (lease, &progress),
        (env_change, installed, installer),
        &req,
        net.as_ref(),
        &ctx,
    )
    .await;
    if result.is_ok() {
        let mut now = session_reqs;
        now.all.extend(
            pip_added
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .drain(..),
        );
        now.all.sort();
        now.all.dedup();
        d.interpreters.set_requirements(&session, now);
    }
    let after = end(d, &session).await;
    let LiveRun {
        end: cell,
        mut interpreter,
        network,
    } = result?;
    interpreter.last_run_lost = last_run_lost;
    d.audit.record(&RunRecord {
        time: now_secs(),
        session: &session.name,
        tenant: session.tenant.as_deref(),
        code_sha256: sha256_hex(&req.code),
        requirements: &requirements,
        env: &env,
        outcome: &cell.outcome,
        cancelled: cell.cancelled,
    });
    if let Some(n) = &network {
        use std::sync::atomic::Ordering::Relaxed;
        d.audit.egress(&session.name, session.tenant.as_deref(), n);
        let allowed: u64 = n.allowed.iter().map(|a| a.connections).sum();
        let denied: u64 = n.denied.iter().map(|x| x.attempts).sum();
        d.egress_allowed.fetch_add(allowed, Relaxed);
        d.egress_denied.fetch_add(denied, Relaxed);
    }
    if cell.cancelled {
        return Err(cancelled());
    }
    let reply = RunReply {
        files: crate::fsops::diff(&before, &after?),
        outcome: cell.outcome,
        stdout: cell.stdout.bytes,
        stderr: cell.stderr.bytes,
        stdout_truncated: cell.stdout.truncated,
        stderr_truncated: cell.stderr.truncated,
        env_built,
        interpreter,
        network,
        outputs: cell.outputs,
        outputs_dropped: cell.outputs_dropped,
    };
    remember(d, &session, &req.code, &reply).await;
    Ok(Reply::Run(reply))
}

/// Adds the run to the session's history, still within its turn so the
/// records keep the runs' order. A failure costs the notebook a cell,
/// never the run its result.
async fn remember(d: &Arc<Daemon>, session: &Arc<Session>, code: &str, reply: &RunReply) {
    let Some(cell) = super::record::record(code, reply) else {
        return;
    };
    let (sessions, s) = (d.sessions.clone(), session.clone());
    let stored = d
        .blocking(move || sessions.record_run(&s, cell).map_err(|e| e.to_reply()))
        .await;
    if let Err(e) = stored {
        tracing::warn!(session = %session.name, error = %e.message, "could not record the run in the session's history");
    }
}

/// The environment for `reqs`, built now (with `progress`) if it is not.
async fn ensure(
    d: &Arc<Daemon>,
    ctx: &Ctx,
    reqs: &[String],
    progress: &(dyn Fn(String) + Send + Sync),
) -> Result<EnvLease, ErrorReply> {
    unless_cancelled(ctx, d.envs.ensure(reqs, progress))
        .await?
        .map_err(|e| e.to_reply())
}

/// The request's size and requirements, checked before any work.
fn check(req: &RunRequest) -> Result<Vec<String>, ErrorReply> {
    if req.code.len() > MAX_CODE_BYTES {
        return Err(bad_request(format!(
            "code is {} bytes; the limit is {MAX_CODE_BYTES}",
            req.code.len()
        )));
    }
    crate::envs::validate_requirements(&req.requirements).map_err(|e| e.to_reply())
}

/// `f`, or the cancelled error if the caller cancels first.
pub(super) async fn unless_cancelled<T>(
    ctx: &Ctx,
    f: impl Future<Output = T>,
) -> Result<T, ErrorReply> {
    tokio::select! {
        v = f => Ok(v),
        _ = ctx.cancel.cancelled() => Err(cancelled()),
    }
}

/// Marks the run in flight on disk and snapshots `output/`.
/// Marks the run in flight on disk and snapshots `output/`; and whether
/// the session's last run before a restart was lost.
async fn begin(d: &Arc<Daemon>, session: &Arc<Session>) -> Result<(Snapshot, bool), ErrorReply> {
    let (sessions, s) = (d.sessions.clone(), session.clone());
    d.blocking(move || {
        let lost = sessions.run_started(&s).map_err(|e| e.to_reply())?;
        let snapshot = crate::fsops::snapshot_output(&s.workspace).map_err(|e| e.to_reply())?;
        Ok((snapshot, lost))
    })
    .await
}

/// Runs the code in the session's live interpreter, streaming its output
/// as events; a cancel of the request kills the interpreter.
async fn execute(
    d: &Arc<Daemon>,
    session: &Session,
    (lease, progress): (EnvLease, &(dyn Fn(String) + Send + Sync)),
    (env_change, installed, installer): (
        Option<(ResetReason, String)>,
        Vec<String>,
        Box<Installer>,
    ),
    req: &RunRequest,
    net: Option<&NetCall>,
    ctx: &Ctx,
) -> Result<LiveRun, ErrorReply> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Stream, Vec<u8>)>();
    let events = ctx.events.clone();
    let forward = tokio::spawn(async move {
        while let Some((s, data)) = rx.recv().await {
            let stream = match s {
                Stream::Stdout => OutputStream::Stdout,
                Stream::Stderr => OutputStream::Stderr,
            };
            events.send(Event::Output { stream, data }).await;
        }
    });
    let policy = d.policy();
    let result = d
        .interpreters
        .run(
            &policy,
            session,
            LiveCall {
                req,
                lease,
                ipython: IpythonFrom {
                    envs: &d.envs,
                    progress,
                },
                net,
                env_change,
                installed,
                installer: Some(installer),
            },
            tx,
            &ctx.cancel,
        )
        .await;
    // Every kept chunk reaches the client before the reply does.
    let _ = forward.await;
    result.map_err(|e| {
        if ctx.cancel.is_cancelled() {
            cancelled()
        } else {
            internal(format!("{e}"))
        }
    })
}

/// Marks the run over and snapshots `output/` again.
async fn end(d: &Arc<Daemon>, session: &Arc<Session>) -> Result<Snapshot, ErrorReply> {
    let (sessions, s) = (d.sessions.clone(), session.clone());
    d.blocking(move || {
        sessions.run_finished(&s);
        sessions.touch(&s);
        crate::fsops::snapshot_output(&s.workspace).map_err(|e| e.to_reply())
    })
    .await
}
