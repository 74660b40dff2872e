//! PNG and JPEG files a run wrote under `output/`, returned as MCP image
//! content so a model sees its plots. Each image and all of them together
//! are capped; larger ones stay listed as artifacts only.

use crate::sessions::SessionRef;
use crate::state::AppState;
use base64::Engine;
use prims_protocol::wire::OutputFile;
use rmcp::model::ContentBlock;

/// Largest image inlined.
const MAX_IMAGE_BYTES: u64 = 1024 * 1024;
/// Largest total of the images inlined in one result.
const MAX_TOTAL_BYTES: u64 = 4 * 1024 * 1024;

fn looks_like(mime: &str, data: &[u8]) -> bool {
    match mime {
        "image/png" => data.starts_with(b"\x89PNG\r\n\x1a\n"),
        "image/jpeg" => data.starts_with(&[0xff, 0xd8, 0xff]),
        _ => false,
    }
}

/// Image blocks for the changed PNG/JPEG files of `files`, within the
/// caps, but those in `shown` (figures the outputs already show).
pub(crate) async fn inline(
    app: &AppState,
    session: &SessionRef,
    files: &[OutputFile],
    shown: &[String],
) -> Vec<ContentBlock> {
    let mut blocks = Vec::new();
    let mut total = 0u64;
    let mut candidates: Vec<&OutputFile> = files
        .iter()
        .filter(|f| f.changed && matches!(f.mime.as_str(), "image/png" | "image/jpeg"))
        .filter(|f| !shown.contains(&format!("output/{}", f.path)))
        .collect();
    candidates.sort_by(|a, b| a.path.cmp(&b.path));
    for f in candidates {
        if f.size == 0 || f.size > MAX_IMAGE_BYTES || total + f.size > MAX_TOTAL_BYTES {
            tracing::debug!(path = %f.path, size = f.size, "image not inlined (size cap)");
            continue;
        }
        let path = format!("output/{}", f.path);
        let tenant = session.tenant.as_deref();
        let read = async {
            let c = app.sup.client().await?;
            c.read_all(&session.id, tenant, &path, MAX_IMAGE_BYTES)
                .await
        };
        let data = match read.await {
            Ok(d) => d,
            Err(e) => {
                tracing::debug!(path, error = %e, "image not inlined");
                continue;
            }
        };
        if !looks_like(&f.mime, &data) {
            tracing::debug!(path, "image not inlined: not really a {}", f.mime);
            continue;
        }
        total += data.len() as u64;
        let b64 = base64::engine::general_purpose::STANDARD.encode(&data);
        blocks.push(ContentBlock::image(b64, f.mime.clone()));
    }
    blocks
}
