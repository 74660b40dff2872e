//! A draining node (its supervisor got `Drain`): a request that names no
//! session gets 503 with `Retry-After`, which the router retries on another
//! node, and `/health` (readiness) answers 503. The router checks
//! `/health/live`, which stays 200, so the node's own sessions go on as
//! before. [`watch`] is the one place that learns of the drain.

use crate::state::AppState;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{header, Method, StatusCode};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How often the front-end asks its supervisor whether it drains.
const POLL: Duration = Duration::from_millis(500);

/// Keep `app.draining` up to date until `shutdown`.
pub(crate) async fn watch(app: Arc<AppState>, shutdown: CancellationToken) {
    loop {
        let ask = async { app.sup.client().await?.stats().await };
        if let Ok(Ok(s)) = tokio::time::timeout(POLL * 4, ask).await {
            if s.draining && !app.draining.swap(true, Ordering::Relaxed) {
                tracing::info!("the supervisor drains: new sessions go to other nodes");
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(POLL) => {}
        }
    }
}

/// 503 for a POST that names no session (a legacy `initialize`, a
/// stateless call without `Mcp-Param-Session-Id`) while draining.
pub(crate) async fn refuse_new_sessions(
    State(app): State<Arc<AppState>>,
    req: Request,
    next: Next,
) -> Response {
    let names_session = ["mcp-session-id", "mcp-param-session-id"]
        .iter()
        .any(|h| req.headers().contains_key(*h));
    if req.method() == Method::POST && !names_session && app.draining.load(Ordering::Relaxed) {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "1")],
            "this PRIMS node is draining for a restart and takes no new sessions\n",
        )
            .into_response();
    }
    next.run(req).await
}
