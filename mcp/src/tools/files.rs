//! `list_dir` and `preview_file`: paths relative to the workspace root.

use super::types::{DirEntryOut, ListDirOutput, PreviewFileOutput};
use crate::error::ToolError;
use crate::paths::{base_name, clean_relative, guess_mime};
use crate::sessions::SessionRef;
use crate::state::AppState;
use prims_protocol::wire::EntryKind;

/// Bytes of a file `preview_file` shows.
const PREVIEW_BYTES: u64 = 8192;

pub(crate) async fn list_dir(
    app: &AppState,
    session: &SessionRef,
    dir_path: &str,
) -> Result<ListDirOutput, ToolError> {
    let dir = clean_relative(dir_path, "dir_path", true)?;
    let dir = if dir.is_empty() { ".".to_owned() } else { dir };
    let c = app.sup.client().await?;
    let mut entries = c
        .list_dir(&session.id, session.tenant.as_deref(), &dir)
        .await?;
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    let result = entries
        .into_iter()
        .map(|e| DirEntryOut {
            kind: match e.kind {
                EntryKind::File => "file",
                EntryKind::Directory => "directory",
                EntryKind::Symlink => "symlink",
                EntryKind::Other => "other",
            }
            .to_owned(),
            name: e.name,
            path: e.path,
            size: e.size,
            modified: e.modified,
        })
        .collect();
    Ok(ListDirOutput {
        result,
        session_id: session.id.clone(),
    })
}

pub(crate) async fn preview_file(
    app: &AppState,
    session: &SessionRef,
    relative_path: &str,
) -> Result<PreviewFileOutput, ToolError> {
    let path = clean_relative(relative_path, "relative_path", false)?;
    let c = app.sup.client().await?;
    let tenant = session.tenant.as_deref();
    let file = c
        .read_file(&session.id, tenant, &path, 0, PREVIEW_BYTES)
        .await?;
    let mime = guess_mime(&path);
    let truncated = file.size > file.data.len() as u64;
    let (content, binary) = match decode(&file.data, truncated) {
        Some(text) => (text, false),
        None => (
            format!(
                "(binary file: {} bytes of {mime}; not shown. Read it from Python, or \
                 download it from /artifacts if it is under output/.)",
                file.size
            ),
            true,
        ),
    };
    Ok(PreviewFileOutput {
        name: base_name(&path),
        path,
        size: file.size,
        mime,
        content,
        truncated,
        binary,
        session_id: session.id.clone(),
    })
}

/// The bytes as text, or `None` when they look binary: a NUL byte, or more
/// than 10% of them not valid UTF-8. A character cut by the preview limit
/// at the end is dropped, not counted as invalid.
fn decode(data: &[u8], cut: bool) -> Option<String> {
    if data.contains(&0) {
        return None;
    }
    let mut data = data;
    if cut {
        if let Err(e) = std::str::from_utf8(data) {
            if e.error_len().is_none() {
                data = &data[..e.valid_up_to()];
            }
        }
    }
    let text = String::from_utf8_lossy(data);
    let bad = text.chars().filter(|c| *c == '\u{fffd}').count();
    let valid_replacements = std::str::from_utf8(data).map_or(0, |s| s.matches('\u{fffd}').count());
    if (bad - valid_replacements) * 10 > data.len().max(1) {
        return None;
    }
    Some(text.into_owned())
}

#[cfg(test)]
mod tests {
    use super::decode;

    #[test]
    fn text_binary_and_cut_characters() {
        assert_eq!(decode(b"a,b\n1,2\n", false).as_deref(), Some("a,b\n1,2\n"));
        assert_eq!(decode(b"\x89PNG\r\n\x1a\n\0\0", false), None);
        assert_eq!(decode(&[0xff; 64], false), None);
        let s = "é".repeat(10);
        let cut = &s.as_bytes()[..7];
        assert_eq!(decode(cut, true).as_deref(), Some("ééé"));
        assert_eq!(
            decode(b"caf\xe9 au lait, tout va bien ici", false)
                .unwrap()
                .len(),
            32
        );
    }
}
