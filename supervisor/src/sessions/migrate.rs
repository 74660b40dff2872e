//! Sessions stored by an earlier version under their ids (metadata format
//! 1: `sessions/<id>/`, `<id>.img`, `<id>.json` holding the id) move under
//! their names, so no id stays visible in a path, a mount table or a loop
//! device's backing file.
//!
//! Each step can be repeated: a crash part-way leaves either the old
//! metadata (the next start finishes the move) or the new one.

use super::key::SessionKey;
use super::layout;
use super::meta::{self, is_valid_id};
use crate::volume as image;
use std::fs;
use std::io::ErrorKind;
use std::path::Path;

pub(super) fn rename_legacy(dir: &Path, key: &SessionKey) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let legacy: Vec<String> = entries
        .flatten()
        .filter_map(|e| {
            let file = e.file_name().to_string_lossy().into_owned();
            let id = file.strip_suffix(".json")?.to_string();
            is_valid_id(&id).then_some(id)
        })
        .filter(|id| meta::read(dir, id).is_ok_and(|m| m.format < meta::FORMAT))
        .collect();
    for id in legacy {
        let name = key.name_of(&id);
        match move_session(dir, &id, &name) {
            Ok(()) => tracing::info!(session = %name, "moved a session under its name"),
            Err(e) => {
                tracing::error!(session = %name, error = %e, "could not move a session stored under its id")
            }
        }
    }
}

fn move_session(dir: &Path, id: &str, name: &str) -> Result<(), String> {
    let mut m = meta::read(dir, id)?;
    let ws = layout::workspace(dir, id);
    // A mount point cannot be renamed; the load mounts it again by name.
    image::unmount(&ws).map_err(|e| e.to_string())?;
    for (from, to) in [
        (layout::image_path(dir, id), layout::image_path(dir, name)),
        (ws, layout::workspace(dir, name)),
    ] {
        match fs::rename(&from, &to) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(format!("renaming {}: {e}", from.display())),
        }
    }
    m.name = name.to_string();
    m.format = meta::FORMAT;
    meta::write(dir, &m, meta::Durability::Durable).map_err(|e| e.to_string())?;
    fs::remove_file(meta::meta_path(dir, id))
        .map_err(|e| format!("removing the old metadata: {e}"))?;
    meta::sync_dir(dir).map_err(|e| format!("syncing the sessions directory: {e}"))
}
