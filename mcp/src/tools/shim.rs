//! How every tool call becomes a result: resolve the caller's session, do
//! the tool's work in it, then finish: count the call, and answer with
//! `structuredContent` and its JSON text mirror, or with an `isError`
//! result that names the session.

use crate::error::ToolError;
use crate::server::PrimsServer;
use crate::sessions::{Caller, SessionRef};
use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde::Serialize;
use std::future::Future;
use tokio_util::sync::CancellationToken;

/// What a tool's work gives: its structured output and the content blocks
/// that follow its JSON text (images).
pub(crate) type Outcome<T> = Result<(T, Vec<ContentBlock>), ToolError>;

/// Who is calling, from the HTTP request the tool call arrived on.
pub(crate) fn caller(ctx: &RequestContext<RoleServer>) -> Caller {
    Caller::from_parts(ctx.extensions.get::<http::request::Parts>())
}

/// An outcome with no content beyond the structured output.
pub(crate) fn plain<T>(r: Result<T, ToolError>) -> Outcome<T> {
    r.map(|v| (v, Vec::new()))
}

/// `work`, unless `ct` is cancelled first: then `work` is dropped and the
/// call fails.
pub(crate) async fn until_cancelled<T>(
    ct: &CancellationToken,
    work: impl Future<Output = Result<T, ToolError>>,
) -> Result<T, ToolError> {
    tokio::select! {
        _ = ct.cancelled() => Err(ToolError::new("The call was cancelled.")),
        r = work => r,
    }
}

impl PrimsServer {
    /// One call of `tool`: its session (`explicit`, else the caller's; see
    /// [`crate::sessions`]), then `work` in that session, then the result.
    pub(super) async fn in_session<T, F, Fut>(
        &self,
        tool: &'static str,
        explicit: Option<String>,
        caller: Caller,
        work: F,
    ) -> Result<CallToolResult, McpError>
    where
        T: Serialize,
        F: FnOnce(SessionRef) -> Fut,
        Fut: Future<Output = Outcome<T>>,
    {
        let resolved = self.app.sessions.resolve(explicit.as_deref(), &caller);
        let session = match resolved.await {
            Ok(s) => s,
            Err(e) => return Ok(self.finish::<T>(tool, None, Err(e))),
        };
        let id = session.id.clone();
        let outcome = work(session).await;
        Ok(self.finish(tool, Some(&id), outcome))
    }

    /// The tool result, and the metrics for it. A failure names the
    /// session it happened in, if there was one.
    pub(super) fn finish<T: Serialize>(
        &self,
        tool: &str,
        session: Option<&str>,
        outcome: Outcome<T>,
    ) -> CallToolResult {
        self.app.metrics.record_tool(tool, outcome.is_ok());
        if let Err(e) = &outcome {
            tracing::debug!(tool, error = %e, "tool failed");
        }
        result(session, outcome)
    }
}

/// The tool result for an outcome: a failure names the session it
/// happened in, if there was one.
pub(crate) fn result<T: Serialize>(session: Option<&str>, outcome: Outcome<T>) -> CallToolResult {
    match outcome {
        Ok((value, extra)) => success(&value, extra),
        Err(mut e) => {
            if let Some(s) = session {
                e.0.push_str(&format!("\n(session_id: {s})"));
            }
            failure(&e)
        }
    }
}

/// A successful result: `structuredContent`, its JSON as the first text
/// block, then `extra` blocks (images).
fn success<T: Serialize>(value: &T, extra: Vec<ContentBlock>) -> CallToolResult {
    let json = serde_json::to_value(value).unwrap_or_else(|e| {
        tracing::error!(error = %e, "serializing a tool result");
        serde_json::Value::Null
    });
    let mut mirror = json.clone();
    super::outputs::shorten_for_text(&mut mirror);
    let mut content = vec![ContentBlock::text(mirror.to_string())];
    content.extend(extra);
    let mut result = CallToolResult::success(content);
    result.structured_content = Some(json);
    result
}

/// A failure the model should read (`isError: true`).
fn failure(e: &ToolError) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(e.0.clone())])
}
