//! Driving `run_code` as an MCP task: start it, poll it, read its result.

use super::client::{params, TaskMcp};
use rmcp::model::{
    CallToolResponse, CallToolResult, DetailedTask, GetTaskParams, TaskPayload, TaskStatus,
};
use serde_json::Value;
use std::time::{Duration, Instant};

/// The task id, or the direct result the server answered instead (a
/// refusal, an error before the run).
pub async fn try_start_task(c: &TaskMcp, args: Value) -> Result<String, CallToolResult> {
    match c.call_tool_once(params("run_code", args)).await {
        Ok(CallToolResponse::Task(t)) => {
            assert_eq!(t.task.status, TaskStatus::Working);
            assert!(t.task.ttl_ms.unwrap_or(0) >= 60_000, "{:?}", t.task);
            assert!(t.task.poll_interval_ms.is_some(), "{:?}", t.task);
            Ok(t.task.task_id)
        }
        Ok(CallToolResponse::Complete(r)) => Err(r),
        other => panic!("run_code as a task: {other:?}"),
    }
}

pub async fn start_task(c: &TaskMcp, args: Value) -> String {
    try_start_task(c, args)
        .await
        .unwrap_or_else(|r| panic!("run_code did not become a task: {r:?}"))
}

pub async fn get(c: &TaskMcp, id: &str) -> DetailedTask {
    c.get_task(GetTaskParams::new(id))
        .await
        .unwrap_or_else(|e| panic!("tasks/get {id}: {e}"))
        .task
}

/// Poll until the task leaves `working`, at most `within`.
pub async fn wait(c: &TaskMcp, id: &str, within: Duration) -> DetailedTask {
    let deadline = Instant::now() + within;
    loop {
        let t = get(c, id).await;
        if t.status() != TaskStatus::Working {
            return t;
        }
        assert!(
            Instant::now() < deadline,
            "task {id} still working after {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The result of a completed task, as the tool call's JSON.
pub fn completed(t: &DetailedTask) -> &serde_json::Map<String, Value> {
    let TaskPayload::Completed { result } = &t.payload else {
        panic!("not completed: {t:?}");
    };
    result
}

pub fn structured(t: &DetailedTask) -> Value {
    let result = completed(t);
    result
        .get("structuredContent")
        .cloned()
        .unwrap_or_else(|| panic!("no structuredContent in {result:?}"))
}

/// The text blocks of a result, joined.
pub fn text(result: &serde_json::Map<String, Value>) -> String {
    (result["content"].as_array().into_iter().flatten())
        .filter_map(|b| b["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}
