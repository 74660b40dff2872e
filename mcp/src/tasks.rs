//! `run_code` as an MCP task (the `io.modelcontextprotocol/tasks`
//! extension, SEP-2663). A client that declares the extension gets a task
//! handle at once; the run belongs to the supervisor, so a dropped
//! connection or a restarted front-end loses nothing, and `tasks/get`
//! returns, at the end, the very result a direct call returns. Clients that
//! do not declare it get the direct call.

use crate::error::ToolError;
use crate::sessions::{Caller, SessionRef};
use crate::state::AppState;
use crate::tools::run_code::{check_size, prepare, report};
use crate::tools::shim::{result, Outcome};
use crate::tools::types::{RunCodeOutput, RunCodeParams};
use prims_protocol::client::ClientError;
use prims_protocol::wire::ErrorCode;
use prims_protocol::wire::{TaskInfo, TaskStatus};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CreateTaskResult, DetailedTask, JsonObject, Task,
    TaskPayload,
};
use rmcp::ErrorData as McpError;
use tokio_util::sync::CancellationToken;

/// What `tasks/get` suggests between polls.
const POLL_INTERVAL_MS: u64 = 500;

/// Task results are kept within a budget per tenant: a result goes when
/// newer ones of the same tenant need its room, or is not kept at all when
/// it is larger than the budget. Another tenant's tasks never push it out.
const EVICTED: &str = "The result of this run was dropped: the server keeps task results \
within a memory budget for each client, and this result was larger than that budget, or \
the oldest of yours when newer results of yours needed the room. The session is as the run \
left it: list_dir and preview_file show its files; run the code again to see its output \
(poll tasks/get sooner, or keep fewer results waiting, to keep a result).";

/// Start `run_code` as a task. What fails before the run exists (bad
/// arguments, an unknown session, a failed download) is answered directly,
/// as the same `isError` result a direct call gives.
pub(crate) async fn start(
    app: &AppState,
    request: CallToolRequestParams,
    caller: Caller,
    ct: CancellationToken,
) -> Result<CallToolResponse, McpError> {
    let args = serde_json::Value::Object(request.arguments.unwrap_or_default());
    let p: RunCodeParams = serde_json::from_value(args)
        .map_err(|e| McpError::invalid_params(format!("run_code arguments: {e}"), None))?;
    if let Err(e) = check_size(&p.code) {
        return Ok(direct(None, Err(e)));
    }
    let session = match app.sessions.resolve(p.session_id.as_deref(), &caller).await {
        Ok(s) => s,
        Err(e) => return Ok(direct(None, Err(e))),
    };
    let started = async {
        let req = prepare(app, &session, p, &ct).await?;
        let c = app.sup.client().await?;
        Ok::<_, ToolError>(c.start_task(req, None).await?)
    };
    match started.await {
        Ok(info) => {
            app.metrics.record_tool("run_code", true);
            tracing::info!(task = %info.task_id, session = %session.tag(), "run_code started as a task");
            Ok(CallToolResponse::Task(CreateTaskResult::new(task(&info))))
        }
        Err(e) => Ok(direct(Some(&session.id), Err(e))),
    }
}

fn direct(session: Option<&str>, outcome: Outcome<RunCodeOutput>) -> CallToolResponse {
    CallToolResponse::Complete(result(session, outcome))
}

/// `tasks/get`: the task as it stands; once the run ended, its result.
pub(crate) async fn get(
    app: &AppState,
    caller: &Caller,
    task_id: &str,
) -> Result<DetailedTask, McpError> {
    let c = app.sup.client().await.map_err(unavailable)?;
    let info = (c.get_task(task_id, caller.tenant.as_deref()).await).map_err(not_found)?;
    let session = SessionRef {
        id: info.session_id.clone(),
        tenant: caller.tenant.clone(),
    };
    let payload = match info.status {
        TaskStatus::Working => TaskPayload::Working,
        TaskStatus::Cancelled => TaskPayload::Cancelled,
        TaskStatus::Completed => {
            let outcome = match (&info.result, &info.error) {
                (Some(reply), _) => report(app, &session, reply).await,
                (None, Some(e)) => Err(ClientError::Server(e.clone()).into()),
                (None, None) => Err(ToolError::new("The run ended without a result; retry.")),
            };
            completed(result(Some(&session.id), outcome))
        }
        TaskStatus::Evicted => {
            let outcome: Outcome<RunCodeOutput> = Err(ToolError::new(EVICTED));
            completed(result(Some(&session.id), outcome))
        }
    };
    Ok(DetailedTask::new(task(&info), payload))
}

/// `tasks/cancel`: kill the run if it is still working.
pub(crate) async fn cancel(app: &AppState, caller: &Caller, task_id: &str) -> Result<(), McpError> {
    let c = app.sup.client().await.map_err(unavailable)?;
    let info = (c.cancel_task(task_id, caller.tenant.as_deref()).await).map_err(not_found)?;
    tracing::info!(task = %info.task_id, status = ?info.status, "task cancel requested");
    Ok(())
}

fn completed(r: rmcp::model::CallToolResult) -> TaskPayload {
    let result = match serde_json::to_value(r) {
        Ok(serde_json::Value::Object(o)) => o,
        _ => JsonObject::new(),
    };
    TaskPayload::Completed { result }
}

fn task(info: &TaskInfo) -> Task {
    let mut t = Task::new(
        info.task_id.clone(),
        rmcp::model::TaskStatus::Working,
        iso8601(info.created_ms),
        iso8601(info.updated_ms),
    )
    .with_ttl_ms(info.ttl_ms)
    .with_poll_interval_ms(POLL_INTERVAL_MS);
    if info.status == TaskStatus::Working {
        t = t.with_status_message("running");
    }
    t
}

fn iso8601(ms: u64) -> String {
    chrono::DateTime::from_timestamp_millis(ms as i64)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn unavailable(e: ClientError) -> McpError {
    McpError::internal_error(ToolError::from(e).0, None)
}

/// An unknown task, or another tenant's, is the same invalid-params error.
fn not_found(e: ClientError) -> McpError {
    match e.code() {
        Some(ErrorCode::NotFound) => McpError::invalid_params(ToolError::from(e).0, None),
        _ => unavailable(e),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(super::iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            super::iso8601(1_780_000_000_123),
            "2026-05-28T20:26:40.123Z"
        );
    }
}
