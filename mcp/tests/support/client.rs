//! rmcp's own client against the front-end, recording notifications.
#![allow(deprecated)] // logging notifications

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
    LoggingMessageNotificationParam, ProgressNotificationParam, ProtocolVersion,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, RoleClient, ServiceExt};
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::Instant;

#[derive(Clone, Default)]
pub struct Recorder {
    pub progress: Arc<Mutex<Vec<(Instant, ProgressNotificationParam)>>>,
    pub logs: Arc<Mutex<Vec<(Instant, LoggingMessageNotificationParam)>>>,
}

impl ClientHandler for Recorder {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push((Instant::now(), params));
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.logs.lock().unwrap().push((Instant::now(), params));
    }
}

pub type Mcp = RunningService<RoleClient, Recorder>;

fn transport(url: &str, token: Option<&str>) -> StreamableHttpClientTransport<reqwest::Client> {
    let mut cfg = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
    if let Some(t) = token {
        cfg = cfg.auth_header(t.to_owned());
    }
    StreamableHttpClientTransport::from_config(cfg)
}

/// A legacy client (initialize, `Mcp-Session-Id`).
pub async fn connect(url: &str, token: Option<&str>) -> Mcp {
    Recorder::default()
        .serve(transport(url, token))
        .await
        .expect("legacy MCP client")
}

/// A 2026-07-28 client: `server/discover`, no session. It lists the tools
/// first, as a client must to learn which arguments (`session_id`) it
/// mirrors into `Mcp-Param-*` headers (SEP-2243); without them the server
/// refuses the call.
pub async fn connect_stateless(url: &str) -> Mcp {
    let c = connect_stateless_unlisted(url).await;
    c.list_all_tools().await.expect("tools/list");
    c
}

/// A 2026-07-28 client that has not listed the tools.
pub async fn connect_stateless_unlisted(url: &str) -> Mcp {
    Recorder::default()
        .serve_with_lifecycle(
            transport(url, None),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("2026-07-28 MCP client")
}

/// What a client that declares the tasks extension sends as its info.
fn task_client() -> ClientConfig {
    let caps = ClientCapabilities::builder().enable_tasks().build();
    ClientConfig::new(caps, Implementation::new("prims-tests", "1"))
}

/// A legacy client that declares the tasks extension.
pub async fn connect_tasks(url: &str, token: Option<&str>) -> TaskMcp {
    task_client()
        .serve(transport(url, token))
        .await
        .expect("legacy MCP client with tasks")
}

/// A client that declares the tasks extension but initializes with
/// protocol 2025-11-25, whose tasks were client-requested.
pub async fn connect_tasks_2025_11_25(url: &str) -> TaskMcp {
    let mut info = task_client();
    info.protocol_version = ProtocolVersion::V_2025_11_25;
    info.serve(transport(url, None))
        .await
        .expect("2025-11-25 MCP client with tasks")
}

/// A 2026-07-28 client that declares the tasks extension.
pub async fn connect_tasks_stateless(url: &str, token: Option<&str>) -> TaskMcp {
    let c = task_client()
        .serve_with_lifecycle(
            transport(url, token),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("2026-07-28 MCP client with tasks");
    c.list_all_tools().await.expect("tools/list");
    c
}

pub type TaskMcp = RunningService<RoleClient, ClientConfig>;

pub fn params(tool: &'static str, args: Value) -> CallToolRequestParams {
    let Value::Object(map) = args else {
        panic!("tool arguments must be an object")
    };
    CallToolRequestParams::new(tool).with_arguments(map)
}

pub async fn call(c: &Mcp, tool: &'static str, args: Value) -> CallToolResult {
    c.call_tool(params(tool, args))
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

/// The structured result of a call that must have succeeded.
pub fn ok(r: &CallToolResult) -> Value {
    assert_ne!(r.is_error, Some(true), "tool failed: {:?}", r.content);
    let v = r.structured_content.clone().expect("structuredContent");
    let text = r.content[0].as_text().expect("text mirror").text.clone();
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap(),
        v,
        "text mirror"
    );
    v
}

/// The message of a call that must have failed as a tool error.
pub fn err(r: &CallToolResult) -> String {
    assert_eq!(
        r.is_error,
        Some(true),
        "expected a tool error: {:?}",
        r.structured_content
    );
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// run_code in `session` (or the connection's), checked to succeed.
pub async fn run(c: &Mcp, code: &str, session: Option<&str>) -> Value {
    let mut args = serde_json::json!({ "code": code });
    if let Some(s) = session {
        args["session_id"] = s.into();
    }
    ok(&call(c, "run_code", args).await)
}
