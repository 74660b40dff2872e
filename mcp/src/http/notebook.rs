//! `GET /sessions/<session_id>/notebook.ipynb`: the session's runs as a
//! Jupyter notebook ([`crate::notebook`]), beside `/artifacts` and behind
//! the same checks: the bearer token's tenant must own the session, and
//! an unknown session, a malformed id and another tenant's session all
//! get the same 404.

use super::artifacts::{checked, plain};
use crate::auth::Tenant;
use crate::notebook::{fetch, NOTEBOOK_MIME};
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use http::{header, HeaderValue, StatusCode};
use prims_protocol::wire::ErrorCode;
use std::sync::Arc;

pub(crate) async fn get(
    State(app): State<Arc<AppState>>,
    Path(session_id): Path<String>,
    parts: http::request::Parts,
) -> Response {
    let tenant = parts.extensions.get::<Tenant>().and_then(|t| t.0.clone());
    let session = match checked(&app, &session_id, tenant.as_deref()).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let body = match fetch(&app.sup, &session).await {
        Ok(b) => b,
        Err(e) if e.code() == Some(ErrorCode::NotFound) => {
            return plain(StatusCode::NOT_FOUND, "no such session")
        }
        Err(e) => {
            tracing::warn!(error = %e, "reading a session's notebook failed");
            return plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "the session's notebook cannot be read",
            );
        }
    };
    let mut resp = (StatusCode::OK, body).into_response();
    let h = resp.headers_mut();
    let pairs = [
        (header::CONTENT_TYPE, NOTEBOOK_MIME),
        (
            header::CONTENT_DISPOSITION,
            "attachment; filename=\"notebook.ipynb\"",
        ),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (
            header::CONTENT_SECURITY_POLICY,
            "sandbox; default-src 'none'",
        ),
        (header::CACHE_CONTROL, "no-store"),
    ];
    for (name, value) in pairs {
        h.insert(name, HeaderValue::from_static(value));
    }
    resp
}
