//! `GET /artifacts/<path>`: a file of the session's `output/`, streamed
//! from the supervisor, with single-range support. `<path>` is relative to
//! `output/`, or an artifact's `relative_path` (`output/...`) as run_code
//! returns it.
//!
//! The session is named by `prims-session-id` (a workspace id, as tools
//! return it) or `mcp-session-id` (the workspace bound to a legacy MCP
//! session). 400: no session header, or a malformed path. 403: a path that
//! leaves `output/` (`..`, absolute, or a symlink out of the workspace).
//! 404: no such file, not a regular file, or a session that ended (or
//! belongs to another tenant).

use crate::auth::Tenant;
use crate::sessions::SessionRef;
use crate::state::AppState;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use http::{header, HeaderMap, HeaderValue, StatusCode};
use prims_protocol::client::ClientError;
use prims_protocol::wire::{ErrorCode, FileData, MAX_CHUNK_BYTES};
use std::sync::Arc;

pub(super) fn plain(status: StatusCode, message: &str) -> Response {
    (status, format!("{message}\n")).into_response()
}

/// The path under `output/`, or the status refusing it.
fn output_path(raw: &str) -> Result<String, (StatusCode, &'static str)> {
    const BAD: (StatusCode, &str) = (StatusCode::BAD_REQUEST, "bad artifact path");
    const OUT: (StatusCode, &str) = (StatusCode::FORBIDDEN, "the path leaves output/");
    if raw.is_empty() || raw.contains('\0') || raw.contains('\\') {
        return Err(BAD);
    }
    if raw.starts_with('/') {
        return Err(OUT);
    }
    let mut parts = Vec::new();
    for p in raw.split('/') {
        match p {
            "" | "." => {}
            ".." => return Err(OUT),
            p => parts.push(p),
        }
    }
    // An artifact's relative_path (`output/x.png`) works as well as the
    // path under output/ (`x.png`).
    if parts.len() > 1 && parts[0] == "output" {
        parts.remove(0);
    }
    if parts.is_empty() {
        return Err(BAD);
    }
    Ok(format!("output/{}", parts.join("/")))
}

/// A single `bytes=` range of a file of `size` bytes as (start, end
/// inclusive); `Ok(None)` to serve the whole file; `Err(())` when unsatisfiable.
fn parse_range(value: &str, size: u64) -> Result<Option<(u64, u64)>, ()> {
    let Some(spec) = value.trim().strip_prefix("bytes=") else {
        return Ok(None);
    };
    if spec.contains(',') {
        return Ok(None);
    }
    let Some((a, b)) = spec.trim().split_once('-') else {
        return Ok(None);
    };
    let (a, b) = (a.trim(), b.trim());
    let range = match (a.parse::<u64>(), b.parse::<u64>()) {
        (Ok(start), Ok(end)) if start <= end => (start, end.min(size.saturating_sub(1))),
        (Ok(start), Err(_)) if b.is_empty() => (start, size.saturating_sub(1)),
        (Err(_), Ok(n)) if a.is_empty() => {
            if n == 0 {
                return Err(());
            }
            (size.saturating_sub(n), size.saturating_sub(1))
        }
        _ => return Ok(None),
    };
    if size == 0 || range.0 >= size {
        return Err(());
    }
    Ok(Some(range))
}

/// Session `id` of `tenant`, or the 404 that any other session, a
/// malformed id or another tenant's session gets alike.
pub(super) async fn checked(
    app: &AppState,
    id: &str,
    tenant: Option<&str>,
) -> Result<SessionRef, Response> {
    let s = SessionRef {
        id: id.to_owned(),
        tenant: tenant.map(str::to_owned),
    };
    match app.sessions.check(&s).await {
        Ok(()) => Ok(s),
        Err(_) => Err(plain(StatusCode::NOT_FOUND, "no such session")),
    }
}

async fn session_of(
    app: &AppState,
    headers: &HeaderMap,
    tenant: Option<&str>,
) -> Result<SessionRef, Response> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|s| !s.is_empty())
    };
    if let Some(id) = header("prims-session-id") {
        return checked(app, id, tenant).await;
    }
    if let Some(mcp) = header("mcp-session-id") {
        return app
            .sessions
            .bound(mcp, tenant)
            .await
            .ok_or_else(|| plain(StatusCode::NOT_FOUND, "this MCP session has no workspace"));
    }
    Err(plain(
        StatusCode::BAD_REQUEST,
        "send the session in a prims-session-id or mcp-session-id header",
    ))
}

/// Up to `limit` bytes of `path` from `offset`.
async fn read(
    app: &AppState,
    session: &SessionRef,
    path: &str,
    offset: u64,
    limit: u64,
) -> Result<FileData, ClientError> {
    let c = app.sup.client().await?;
    let tenant = session.tenant.as_deref();
    c.read_file(&session.id, tenant, path, offset, limit).await
}

fn read_error(e: &ClientError) -> Response {
    match e.code() {
        Some(ErrorCode::Forbidden) => plain(StatusCode::FORBIDDEN, "the path leaves output/"),
        Some(ErrorCode::NotFound | ErrorCode::BadRequest) => {
            plain(StatusCode::NOT_FOUND, "no such file")
        }
        _ => {
            tracing::warn!(error = %e, "artifact read failed");
            plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "the sandbox service is unavailable",
            )
        }
    }
}

pub(crate) async fn get(
    State(app): State<Arc<AppState>>,
    Path(raw): Path<String>,
    parts: http::request::Parts,
) -> Response {
    let path = match output_path(&raw) {
        Ok(p) => p,
        Err((status, why)) => return plain(status, why),
    };
    let tenant = parts.extensions.get::<Tenant>().and_then(|t| t.0.clone());
    let session = match session_of(&app, &parts.headers, tenant.as_deref()).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let size = match read(&app, &session, &path, 0, 0).await {
        Ok(f) => f.size,
        Err(e) => return read_error(&e),
    };
    let range = parts
        .headers
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .map(|v| parse_range(v, size))
        .unwrap_or(Ok(None));
    let (status, start, len) = match range {
        Ok(None) => (StatusCode::OK, 0, size),
        Ok(Some((a, b))) => (StatusCode::PARTIAL_CONTENT, a, b - a + 1),
        Err(()) => {
            let mut r = plain(StatusCode::RANGE_NOT_SATISFIABLE, "range not satisfiable");
            if let Ok(v) = HeaderValue::from_str(&format!("bytes */{size}")) {
                r.headers_mut().insert(header::CONTENT_RANGE, v);
            }
            return r;
        }
    };
    let body = Body::from_stream(chunks(app.clone(), session, path.clone(), start, len));
    let mut resp = (status, body).into_response();
    let h = resp.headers_mut();
    let mime = mime_guess::from_path(&path).first_or_octet_stream();
    let pairs = [
        (header::CONTENT_TYPE, mime.essence_str().to_owned()),
        (header::CONTENT_LENGTH, len.to_string()),
        (header::ACCEPT_RANGES, "bytes".to_owned()),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_owned()),
        (
            header::CONTENT_SECURITY_POLICY,
            "sandbox; default-src 'none'".to_owned(),
        ),
        (header::CACHE_CONTROL, "no-store".to_owned()),
    ];
    for (name, value) in pairs {
        if let Ok(v) = HeaderValue::from_str(&value) {
            h.insert(name, v);
        }
    }
    if status == StatusCode::PARTIAL_CONTENT {
        let end = start + len - 1;
        if let Ok(v) = HeaderValue::from_str(&format!("bytes {start}-{end}/{size}")) {
            h.insert(header::CONTENT_RANGE, v);
        }
    }
    resp
}

/// The bytes `[start, start + len)` of the file, one supervisor read at a time.
fn chunks(
    app: Arc<AppState>,
    session: SessionRef,
    path: String,
    start: u64,
    len: u64,
) -> impl futures::Stream<Item = Result<bytes::Bytes, std::io::Error>> {
    futures::stream::unfold((start, len), move |(offset, left)| {
        let (app, session, path) = (app.clone(), session.clone(), path.clone());
        async move {
            if left == 0 {
                return None;
            }
            let want = left.min(MAX_CHUNK_BYTES as u64);
            match read(&app, &session, &path, offset, want).await {
                Ok(f) if !f.data.is_empty() => {
                    let n = f.data.len() as u64;
                    Some((Ok(bytes::Bytes::from(f.data)), (offset + n, left - n)))
                }
                Ok(_) => Some((Err(std::io::Error::other("the file shrank")), (offset, 0))),
                Err(e) => Some((Err(std::io::Error::other(e.to_string())), (offset, 0))),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert_eq!(parse_range("bytes=0-9", 100), Ok(Some((0, 9))));
        assert_eq!(parse_range("bytes=90-", 100), Ok(Some((90, 99))));
        assert_eq!(parse_range("bytes=-10", 100), Ok(Some((90, 99))));
        assert_eq!(parse_range("bytes=50-500", 100), Ok(Some((50, 99))));
        assert_eq!(parse_range("bytes=100-", 100), Err(()));
        assert_eq!(parse_range("bytes=0-1,5-6", 100), Ok(None));
        assert_eq!(parse_range("items=0-1", 100), Ok(None));
    }

    #[test]
    fn paths() {
        assert_eq!(output_path("a/b.png").unwrap(), "output/a/b.png");
        assert_eq!(output_path("output/a/b.png").unwrap(), "output/a/b.png");
        assert_eq!(output_path("output").unwrap(), "output/output");
        assert_eq!(output_path("../x").unwrap_err().0, StatusCode::FORBIDDEN);
        assert_eq!(
            output_path("/etc/passwd").unwrap_err().0,
            StatusCode::FORBIDDEN
        );
        assert_eq!(output_path("").unwrap_err().0, StatusCode::BAD_REQUEST);
    }
}
