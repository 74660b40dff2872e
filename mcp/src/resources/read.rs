//! `resources/read`: a workspace file whole, as text when it is UTF-8 text
//! and as a base64 blob otherwise, up to [`MAX_READ_BYTES`]; or, for
//! `notebook.ipynb`, the session's runs as a notebook ([`crate::notebook`]);
//! for `checkpoints`, the session's checkpoints as JSON.

use crate::error::ToolError;
use crate::notebook::{NOTEBOOK_MIME, NOTEBOOK_PATH};
use crate::paths::guess_mime;
use crate::sessions::{Caller, SessionRef};
use crate::state::AppState;
use crate::uri::parse;
use base64::Engine;
use prims_protocol::client::ClientError;
use prims_protocol::wire::ErrorCode;
use rmcp::model::ResourceContents;

/// The most a read returns: a larger file is refused with its size and
/// where to get it instead (`/artifacts`, or `preview_file` for its head).
const MAX_READ_BYTES: u64 = 4 * 1024 * 1024;
/// The session's checkpoints, as a resource of its own.
const CHECKPOINTS_PATH: &str = "checkpoints";

pub(crate) enum ReadError {
    /// No such file, session or tenant: the spec's "resource not found".
    NotFound(String),
    Other(ToolError),
}

impl From<ToolError> for ReadError {
    fn from(e: ToolError) -> Self {
        ReadError::Other(e)
    }
}

pub(crate) async fn read(
    app: &AppState,
    caller: &Caller,
    uri: &str,
) -> Result<ResourceContents, ReadError> {
    if let Some(view) = crate::views::read(uri) {
        return Ok(view);
    }
    let (session_id, path) = parse(uri)?;
    let s = app
        .sessions
        .resolve(Some(&session_id), caller)
        .await
        .map_err(|e| ReadError::NotFound(e.0))?;
    if path == NOTEBOOK_PATH {
        // The session's runs, not a workspace file: a file of that name at
        // the workspace root is read with preview_file instead.
        let nb = crate::notebook::fetch(&app.sup, &s)
            .await
            .map_err(|e| session_error(e, &session_id))?;
        let text = String::from_utf8_lossy(&nb).into_owned();
        return Ok(ResourceContents::text(text, uri).with_mime_type(NOTEBOOK_MIME));
    }
    if path == CHECKPOINTS_PATH {
        // The session's checkpoints, not a workspace file (a file of that
        // name at the workspace root is read with preview_file instead).
        let c = app
            .sup
            .client()
            .await
            .map_err(|e| ReadError::Other(e.into()))?;
        let list = c
            .list_checkpoints(&s.id, s.tenant.as_deref())
            .await
            .map_err(|e| session_error(e, &session_id))?;
        let text = serde_json::json!({ "checkpoints": list }).to_string();
        return Ok(ResourceContents::text(text, uri).with_mime_type("application/json"));
    }
    let data = read_bytes(app, &s, &path)
        .await
        .map_err(|e| match e.code() {
            Some(ErrorCode::NotFound) => {
                ReadError::NotFound(format!("no file {path} in session {session_id}"))
            }
            Some(ErrorCode::Quota) => ReadError::Other(ToolError(format!(
                "{path} is larger than the {MAX_READ_BYTES}-byte limit of a resource read; \
             preview_file shows its head, and files under output/ download from /artifacts"
            ))),
            _ => ReadError::Other(e.into()),
        })?;
    let mime = guess_mime(&path);
    Ok(match text(&data, &mime) {
        Some(t) => ResourceContents::text(t, uri).with_mime_type(mime),
        None => {
            ResourceContents::blob(base64::engine::general_purpose::STANDARD.encode(&data), uri)
                .with_mime_type(mime)
        }
    })
}

/// A failure about the session itself: a missing one is "not found".
fn session_error(e: ClientError, session_id: &str) -> ReadError {
    match e.code() {
        Some(ErrorCode::NotFound) => ReadError::NotFound(format!("no session {session_id}")),
        _ => ReadError::Other(e.into()),
    }
}

async fn read_bytes(app: &AppState, s: &SessionRef, path: &str) -> Result<Vec<u8>, ClientError> {
    let c = app.sup.client().await?;
    c.read_all(&s.id, s.tenant.as_deref(), path, MAX_READ_BYTES)
        .await
}

/// Text when the type says so or the bytes are UTF-8 with no NUL; images,
/// archives and the like stay blobs whatever their bytes.
fn text(data: &[u8], mime: &str) -> Option<String> {
    let texty = mime.starts_with("text/")
        || matches!(
            mime,
            "application/json" | "application/xml" | "application/javascript"
        )
        || mime.ends_with("+json")
        || mime.ends_with("+xml")
        || mime == "application/octet-stream";
    if !texty || data.contains(&0) {
        return None;
    }
    String::from_utf8(data.to_vec()).ok()
}

#[cfg(test)]
mod tests {
    use super::text;

    #[test]
    fn text_or_blob() {
        assert_eq!(text(b"a,b\n", "text/csv").as_deref(), Some("a,b\n"));
        assert_eq!(text(b"{}", "application/json").as_deref(), Some("{}"));
        assert_eq!(
            text(b"plain", "application/octet-stream").as_deref(),
            Some("plain")
        );
        assert_eq!(text(b"\x89PNG", "image/png"), None);
        assert_eq!(text(b"svg-ish text", "image/png"), None);
        assert_eq!(text(b"a\0b", "text/plain"), None);
        assert_eq!(text(&[0xff, 0xfe], "text/plain"), None);
    }
}
