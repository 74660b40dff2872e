//! `resources/list`: the regular files of a workspace, walked directory by
//! directory through the supervisor, sorted by path and served in pages.
//! The cursor is the path to start after, so pages stay right while runs
//! add or remove files between them.

use crate::error::ToolError;
use crate::paths::{base_name, guess_mime};
use crate::sessions::SessionRef;
use crate::state::AppState;
use crate::uri::uri;
use base64::Engine;
use prims_protocol::wire::EntryKind;
use rmcp::model::Resource;

/// Resources in one page.
const PAGE: usize = 100;
/// Directories visited and files listed per walk, so that a workspace of a
/// million files costs a bounded amount.
const MAX_DIRS: usize = 1000;
const MAX_FILES: usize = 10_000;

pub(crate) struct Page {
    pub(crate) resources: Vec<Resource>,
    pub(crate) next_cursor: Option<String>,
}

/// Every regular file of the workspace, sorted by path, with its size.
async fn walk(app: &AppState, s: &SessionRef) -> Result<Vec<(String, u64)>, ToolError> {
    let c = app.sup.client().await?;
    let mut dirs = vec![".".to_owned()];
    let (mut visited, mut files) = (0, Vec::new());
    while let Some(dir) = dirs.pop() {
        visited += 1;
        if visited > MAX_DIRS {
            break;
        }
        for e in c.list_dir(&s.id, s.tenant.as_deref(), &dir).await? {
            match e.kind {
                EntryKind::Directory => dirs.push(e.path),
                EntryKind::File if files.len() < MAX_FILES => files.push((e.path, e.size)),
                // Symlinks are never followed, and are not resources.
                _ => {}
            }
        }
    }
    files.sort();
    Ok(files)
}

pub(crate) async fn page(
    app: &AppState,
    s: &SessionRef,
    cursor: Option<&str>,
) -> Result<Page, ToolError> {
    let after = cursor.map(decode_cursor).transpose()?;
    let files = walk(app, s).await?;
    let start = after.map_or(0, |a| {
        files.partition_point(|(p, _)| p.as_str() <= a.as_str())
    });
    let end = (start + PAGE).min(files.len());
    let resources = (files[start..end].iter())
        .map(|(path, size)| {
            Resource::new(uri(&s.id, path), base_name(path))
                .with_title(path.clone())
                .with_mime_type(guess_mime(path))
                .with_size(*size)
        })
        .collect();
    let next_cursor = (end < files.len()).then(|| encode_cursor(&files[end - 1].0));
    Ok(Page {
        resources,
        next_cursor,
    })
}

fn encode_cursor(path: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(path)
}

fn decode_cursor(c: &str) -> Result<String, ToolError> {
    let bad = || {
        ToolError(format!(
            "invalid cursor {c:?}: pass a nextCursor as it came"
        ))
    };
    if c.len() > 8192 {
        return Err(bad());
    }
    let bytes = (base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(c)).map_err(|_| bad())?;
    String::from_utf8(bytes).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_junk_is_refused() {
        let c = encode_cursor("output/ü b.csv");
        assert_eq!(decode_cursor(&c).unwrap(), "output/ü b.csv");
        assert!(decode_cursor("!!!").is_err());
        assert!(decode_cursor(&"A".repeat(9000)).is_err());
    }
}
