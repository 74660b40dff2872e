//! `persist_artifact`: PUT a file of `output/` to a presigned URL, whole and
//! with a Content-Length (the egress client never sends a chunked body).
//! `relative_path` is relative to `output/`; an artifact's `relative_path`
//! as run_code lists it (`output/...`) names the same file.

use super::types::PersistArtifactOutput;
use crate::error::ToolError;
use crate::paths::{clean_relative, guess_mime};
use crate::sessions::SessionRef;
use crate::state::AppState;
use prims_protocol::wire::ErrorCode;

pub(crate) async fn persist_artifact(
    app: &AppState,
    session: &SessionRef,
    relative_path: &str,
    presigned_url: &str,
) -> Result<PersistArtifactOutput, ToolError> {
    let rel = clean_relative(relative_path, "relative_path", false)?;
    // run_code lists artifacts as output/<path>; that names the same file.
    let rel = match rel.strip_prefix("output/") {
        Some(rest) => rest.to_owned(),
        None => rel,
    };
    let path = format!("output/{rel}");
    let egress = app.egress()?;
    let max = app.policy.egress.max_upload.bytes();
    let c = app.sup.client().await?;
    let data = match c
        .read_all(&session.id, session.tenant.as_deref(), &path, max)
        .await
    {
        Ok(d) => d,
        Err(e) if e.code() == Some(ErrorCode::Quota) => {
            return Err(ToolError(format!(
                "File too large to persist: {path} is over the upload limit of {max} bytes"
            )));
        }
        Err(e) => return Err(e.into()),
    };
    let up = egress
        .upload(presigned_url, bytes::Bytes::from(data), &guess_mime(&rel))
        .await
        .map_err(|e| ToolError(e.to_string()))?;
    tracing::info!(
        session = %session.tag(),
        path,
        bytes = up.bytes,
        status = up.status,
        "persisted an artifact"
    );
    Ok(PersistArtifactOutput {
        uploaded_bytes: up.bytes,
        status: up.status,
        session_id: session.id.clone(),
    })
}
