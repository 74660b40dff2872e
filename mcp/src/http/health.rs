//! `GET /health` and `GET /metrics`.

use crate::state::AppState;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use http::{header, StatusCode};
use std::sync::Arc;
use std::time::Duration;

const STATS_TIMEOUT: Duration = Duration::from_secs(2);

async fn stats(app: &AppState) -> Option<prims_protocol::wire::Stats> {
    let stats = async { app.sup.client().await?.stats().await };
    match tokio::time::timeout(STATS_TIMEOUT, stats).await {
        Ok(Ok(s)) => Some(s),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "health: the supervisor did not answer");
            None
        }
        Err(_) => None,
    }
}

/// 200 once the server is ready: the supervisor answers, and what a new
/// session's first call needs is up (the base environment, the IPython
/// layer, the default environment's fork template, the warm pool's first
/// spare), or the start-up's
/// bound passed; `degraded` names what failed on the way. 503 before
/// (`starting`, with what it still waits for in `waiting_for`), when the
/// supervisor does not answer, or when it drains (`draining`: not ready
/// for new sessions).
pub(crate) async fn health(State(app): State<Arc<AppState>>) -> Response {
    match stats(&app).await {
        Some(s) if s.draining => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(serde_json::json!({
                "status": "draining",
                "supervisor": true,
                "sessions": s.sessions,
                "runs_active": s.runs_active,
                "tasks_working": s.tasks_working,
            })),
        )
            .into_response(),
        Some(s) if !s.ready => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(serde_json::json!({
                "status": "starting",
                "supervisor": true,
                "waiting_for": s.waiting_for,
                "degraded": s.degraded,
                "base_env_ready": s.base_env_ready,
                "templates_up": s.templates_up,
            })),
        )
            .into_response(),
        Some(s) => Json(serde_json::json!({
            "status": "ok",
            "supervisor": true,
            "degraded": s.degraded,
            "waiting_for": s.waiting_for,
            "base_env_ready": s.base_env_ready,
            "templates_up": s.templates_up,
            "sessions": s.sessions,
            "runs_active": s.runs_active,
            "runs_queued": s.runs_queued,
        }))
        .into_response(),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(serde_json::json!({
                "status": "unavailable",
                "supervisor": false,
                "base_env_ready": false,
            })),
        )
            .into_response(),
    }
}

/// Liveness, for a router: 200 while the supervisor answers, draining or
/// not (a draining node still serves its sessions), 503 when it does not.
pub(crate) async fn live(State(app): State<Arc<AppState>>) -> Response {
    match stats(&app).await {
        Some(s) => Json(serde_json::json!({
            "status": if s.draining { "draining" } else { "ok" },
            "supervisor": true,
        }))
        .into_response(),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(serde_json::json!({ "status": "unavailable", "supervisor": false })),
        )
            .into_response(),
    }
}

/// Prometheus text. Routed behind the bearer-token check (any configured
/// token), unlike the two health checks above.
pub(crate) async fn metrics(State(app): State<Arc<AppState>>) -> Response {
    let s = stats(&app).await;
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        app.metrics.render(s.as_ref()),
    )
        .into_response()
}
