//! `run_code`: mount `files[]`, run the code in the session's jail while
//! streaming its output, and report the outcome, artifacts and images.

use super::shim::until_cancelled;
use super::types::{
    Artifact, NetAllowed, NetDenied, NetworkOut, RunCodeOutput, RunCodeParams, Truncated,
};
use super::{images, mount, outputs};
use crate::error::ToolError;
use crate::paths::base_name;
use crate::sessions::SessionRef;
use crate::state::AppState;
use crate::streaming::Streamer;
use crate::uri::uri;
use prims_protocol::jail::{LimitRequest, Status};
use prims_protocol::wire::{
    Event, InterpreterState, OutputFile, Reply, RequestBody, ResetReason, RunReply, RunRequest,
};
use rmcp::model::{ContentBlock, Resource};
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// Resource links in one result, at most (the rest are in `artifacts`).
const MAX_LINKS: usize = 100;

/// The original's limit, in characters.
const MAX_CODE_CHARS: usize = 20_000;

const FEEDBACK: &str = "No output detected. Use print() (or write to stderr) to show results, \
or end the code with an expression such as df.head() to get its value back as result. \
For wide pandas tables, run pd.set_option('display.max_columns', None) and \
pd.set_option('display.width', 10000) before printing. Read mounted files by their mount path, \
e.g. pd.read_csv('mounts/my_data.csv'). Files you write under output/ are returned as artifacts.";

/// What the no-output hint says of earlier calls' variables, by `state`.
const KEPT: &str = "Variables from earlier calls of this session are still defined.";

/// Refuses code over [`MAX_CODE_CHARS`], before any session is resolved.
pub(crate) fn check_size(code: &str) -> Result<(), ToolError> {
    if code.chars().count() > MAX_CODE_CHARS {
        return Err(ToolError::new("Code block too large (20k char limit)"));
    }
    Ok(())
}

/// Run `p` in `session`, whose code passed [`check_size`].
pub(crate) async fn run_code(
    app: &AppState,
    session: &SessionRef,
    p: RunCodeParams,
    ct: CancellationToken,
    streamer: Option<Streamer>,
) -> Result<(RunCodeOutput, Vec<ContentBlock>), ToolError> {
    let _running = app.watch.begin(&session.id);
    let req = prepare(app, session, p, &ct).await?;
    let started = Instant::now();
    let reply = match execute(app, req, ct, streamer).await {
        Ok(r) => r,
        Err(e) => {
            app.metrics.record_run("error", started.elapsed());
            return Err(e);
        }
    };
    let reported = report(app, session, &reply).await;
    let status = match &reported {
        Ok((out, _)) => out.status.as_str(),
        Err(_) => "setup_error",
    };
    app.metrics.record_run(status, started.elapsed());
    reported
}

/// Everything before the run itself: check the arguments, download
/// `files[]` into the workspace, and say what to run.
pub(crate) async fn prepare(
    app: &AppState,
    session: &SessionRef,
    p: RunCodeParams,
    ct: &CancellationToken,
) -> Result<RunRequest, ToolError> {
    let wall_time_ms = match p.timeout_s {
        None => None,
        Some(t) if t.is_finite() && t > 0.0 => Some(((t * 1000.0).ceil() as u64).max(1)),
        Some(t) => {
            return Err(ToolError(format!(
                "timeout_s must be a positive number of seconds, not {t}"
            )))
        }
    };
    for f in p.files.iter().flatten() {
        until_cancelled(ct, mount::mount(app, session, &f.url, &f.mount_path)).await?;
    }
    Ok(RunRequest {
        session_id: session.id.clone(),
        tenant: session.tenant.clone(),
        code: p.code,
        requirements: p.requirements.unwrap_or_default(),
        limits: LimitRequest {
            wall_time_ms,
            ..Default::default()
        },
        fresh: p.fresh.unwrap_or(false),
        network: p.network,
    })
}

/// The result of a finished run, as the tool returns it, whether the run
/// was a direct call or a task.
pub(crate) async fn report(
    app: &AppState,
    session: &SessionRef,
    reply: &RunReply,
) -> Result<(RunCodeOutput, Vec<ContentBlock>), ToolError> {
    let o = &reply.outcome;
    let status = match o.status {
        Status::Ok => "ok",
        Status::Exit => "exit",
        Status::Signal => "signal",
        Status::Error => "error",
        Status::Timeout => "timeout",
        Status::Oom => "oom",
        Status::Stopped => "stopped",
        Status::SetupError => {
            let why = o
                .setup_error
                .as_ref()
                .map_or_else(|| "unknown reason".to_owned(), |e| e.to_string());
            return Err(ToolError(format!(
                "The sandbox could not start this run ({why}). This is a server problem; retry later."
            )));
        }
    };
    let written: Vec<String> = (reply.files.iter())
        .filter(|f| f.changed)
        .map(|f| format!("output/{}", f.path))
        .collect();
    app.watch.changed(&app.sup, session, &written).await;
    let mut extra = outputs::blocks(&reply.outputs);
    extra.extend(links(session, &reply.files));
    let shown = outputs::shown_files(&reply.outputs);
    extra.extend(images::inline(app, session, &reply.files, &shown).await);
    Ok((output(session, status, reply), extra))
}

/// A `resource_link` for each file of output/ this run wrote, so a client
/// can read or subscribe to it as an MCP resource.
fn links(session: &SessionRef, files: &[OutputFile]) -> Vec<ContentBlock> {
    let mut links: Vec<_> = (files.iter().filter(|f| f.changed))
        .map(|f| {
            let path = format!("output/{}", f.path);
            let r = Resource::new(uri(&session.id, &path), base_name(&path))
                .with_mime_type(f.mime.clone())
                .with_size(f.size);
            ContentBlock::resource_link(r)
        })
        .collect();
    links.truncate(MAX_LINKS);
    links
}

/// Start the run and follow its events until the reply.
async fn execute(
    app: &AppState,
    req: RunRequest,
    ct: CancellationToken,
    mut streamer: Option<Streamer>,
) -> Result<RunReply, ToolError> {
    let mut call = app.sup.client().await?.call(RequestBody::Run(req)).await?;
    loop {
        let due = streamer.as_ref().and_then(Streamer::due);
        tokio::select! {
            _ = ct.cancelled() => {
                tracing::info!(request = call.id(), "run cancelled by the client");
                // Dropping the unfinished call makes the supervisor kill the jail.
                drop(call);
                return Err(ToolError::new("The run was cancelled."));
            }
            _ = tokio::time::sleep_until(due.unwrap_or_else(tokio::time::Instant::now)), if due.is_some() => {
                if let Some(s) = streamer.as_mut() {
                    s.flush(false).await;
                }
            }
            ev = call.next_event() => match ev? {
                Some(Event::Output { stream, data }) => {
                    if let Some(s) = streamer.as_mut() {
                        s.push(stream, &data);
                    }
                }
                Some(Event::Queued { position }) => {
                    if let Some(s) = streamer.as_mut() {
                        s.status(format!("queued: {position} run(s) ahead")).await;
                    }
                }
                Some(Event::Building { message }) => {
                    if let Some(s) = streamer.as_mut() {
                        s.status(message).await;
                    }
                }
                Some(Event::Started) => {}
                None => break,
            },
        }
    }
    if let Some(s) = streamer.as_mut() {
        s.flush(true).await;
    }
    match call.finish().await? {
        Reply::Run(r) => Ok(r),
        other => {
            tracing::error!(?other, "unexpected reply to a run");
            Err(ToolError::new("The sandbox answered unexpectedly; retry."))
        }
    }
}

fn output(session: &SessionRef, status: &str, reply: &RunReply) -> RunCodeOutput {
    let o = &reply.outcome;
    let stdout = String::from_utf8_lossy(&reply.stdout).into_owned();
    let it = &reply.interpreter;
    let mut notes = Vec::new();
    let replaced = it.state == InterpreterState::Reset;
    if replaced && it.reason != Some(ResetReason::FreshRequested) {
        notes.push(reset_note(it));
    }
    if stdout.is_empty() && it.result.is_none() {
        notes.push(FEEDBACK.to_owned());
        if it.state == InterpreterState::Kept {
            notes.push(KEPT.to_owned());
        }
    }
    match o.status {
        Status::Timeout => notes.push(
            "The run hit its time limit and was stopped; the output so far is shown.".to_owned(),
        ),
        Status::Oom => notes.push("The run ran out of memory and was killed.".to_owned()),
        Status::Stopped => notes.push(
            "The server stopped while this call ran: the cell was interrupted and the output \
             so far is shown. The session's variables were saved; after the server's next \
             start the session continues from them."
                .to_owned(),
        ),
        _ => {}
    }
    if it.last_run_lost {
        notes.push(
            "The session's last call before the server went down never finished: its \
             variables are not in what was restored, though it may have changed files."
                .to_owned(),
        );
    }
    let network = reply.network.as_ref().map(network_out);
    if let Some(d) = reply.network.as_ref().and_then(|n| n.denied.first()) {
        if o.status != Status::Ok {
            notes.push(format!(
                "The egress allow-list refused {}:{} ({}), which is the likely cause of the failure; see network.denied.",
                d.host, d.port, d.reason
            ));
        }
    }
    let mut artifacts: Vec<Artifact> = reply
        .files
        .iter()
        .map(|f| Artifact {
            name: base_name(&f.path),
            relative_path: format!("output/{}", f.path),
            size: f.size,
            mime: f.mime.clone(),
            changed: f.changed,
        })
        .collect();
    artifacts.sort_by(|a, b| a.relative_path.cmp(&b.relative_path));
    RunCodeOutput {
        stdout,
        stderr: String::from_utf8_lossy(&reply.stderr).into_owned(),
        artifacts,
        session_id: session.id.clone(),
        feedback: (!notes.is_empty()).then(|| notes.join(" ")),
        exit_code: o.exit_code,
        signal: o.signal,
        status: status.to_owned(),
        timed_out: o.status == Status::Timeout,
        oom_killed: o.oom_killed || o.status == Status::Oom,
        duration_ms: o.wall_ms,
        cpu_ms: o.cpu_ms,
        memory_peak_bytes: o.memory_peak_bytes,
        truncated: Truncated {
            stdout: reply.stdout_truncated,
            stderr: reply.stderr_truncated,
        },
        result: it.result.clone(),
        outputs: reply.outputs.iter().map(outputs::out).collect(),
        outputs_dropped: reply.outputs_dropped,
        state: snake(&it.state),
        state_reason: it.reason.as_ref().map(snake),
        state_message: it.reason_message.clone(),
        installed: it.installed.clone(),
        restored: it.restored.clone(),
        not_restored: it
            .not_restored
            .iter()
            .map(|n| format!("{}: {}", n.name, n.why))
            .collect(),
        saved_at: it.saved_at.map(rfc3339),
        last_run_lost: it.last_run_lost,
        network,
    }
}

/// Unix seconds as RFC 3339 UTC (`2026-12-07T03:21:09Z`).
fn rfc3339(secs: u64) -> String {
    i64::try_from(secs)
        .ok()
        .and_then(|s| chrono::DateTime::from_timestamp(s, 0))
        .map_or_else(
            || secs.to_string(),
            |t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
        )
}

/// Why the variables of earlier calls are gone, and which came back.
fn reset_note(it: &prims_protocol::wire::Interpreter) -> String {
    let why = it.reason.as_ref().map(snake).unwrap_or_default();
    let when = it
        .saved_at
        .map(|s| format!(" at {}", rfc3339(s)))
        .unwrap_or_default();
    let kept = if it.restored.is_empty() {
        String::new()
    } else {
        format!(
            "; the ones listed in restored ({}) were saved{when} and restored",
            it.restored.join(", ")
        )
    };
    let words = it
        .reason_message
        .as_ref()
        .map(|m| format!(" ({m})"))
        .unwrap_or_default();
    format!(
        "This call ran in a new interpreter (state_reason: {why}{words}): variables, imports \
         and functions of earlier calls are gone{kept}."
    )
}

fn network_out(n: &prims_protocol::egress::NetworkReport) -> NetworkOut {
    NetworkOut {
        allowed: n
            .allowed
            .iter()
            .map(|a| NetAllowed {
                host: a.host.clone(),
                port: a.port,
                bytes: a.bytes,
            })
            .collect(),
        denied: n
            .denied
            .iter()
            .map(|d| NetDenied {
                host: d.host.clone(),
                port: d.port,
                reason: d.reason.clone(),
            })
            .collect(),
        ignored: n.ignored.clone(),
    }
}

/// The wire's snake_case name of a unit enum value.
fn snake<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::new(),
    }
}
