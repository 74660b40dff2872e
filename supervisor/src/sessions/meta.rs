//! Session ids and the metadata file `sessions/<name>.json`, which lives
//! next to the workspace, never inside it (jailed code controls the
//! workspace). `<name>` is the keyed hash of the id (see `key`); the id
//! itself is never written to disk.

use super::error::SessionError;
use prims_protocol::node::NodeId;
use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// What survives a restart of the supervisor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Meta {
    /// The session's name. Files of format 1 held the id itself here.
    #[serde(alias = "id")]
    pub name: String,
    /// 2 since sessions are stored under their names; absent (1) before.
    #[serde(default = "legacy_format")]
    pub format: u32,
    pub tenant: Option<String>,
    /// Unix seconds.
    pub created: u64,
    pub last_used: u64,
    pub host_uid: u32,
    /// Size of the quota image in bytes; 0 for a plain, unenforced directory.
    pub disk_quota: u64,
    /// A run started and has not finished (yet, or ever: a crash).
    #[serde(default)]
    pub run_in_flight: bool,
    /// The last run was cut short by a supervisor restart.
    #[serde(default)]
    pub last_run_lost: bool,
    /// Being closed: the next start finishes the job.
    #[serde(default)]
    pub closing: bool,
    /// Made ahead of need for the warm pool and not yet given to anyone:
    /// the next start removes it (its interpreter died with the old process).
    #[serde(default)]
    pub spare: bool,
    /// Code ran in it: after a restart, its next call reports that its
    /// interpreter was lost to the restart.
    #[serde(default)]
    pub ran: bool,
    /// The globals of its interpreter are saved in the workspace (by a
    /// stop, an autosave or a graceful stop): the session's first
    /// interpreter after a restart restores them. The globals that could
    /// not be saved, with why. Cleared when a new interpreter starts
    /// without them (`fresh: true`), so that a crash never brings back
    /// what the session chose to leave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved_globals: Option<Vec<prims_protocol::wire::NotRestored>>,
    /// When that save was made, in Unix seconds (absent in records of
    /// older versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved_at: Option<u64>,
    /// The name of the session its fork tree grew from, when it is a
    /// branch (`fork_session`); absent for a session opened as such, which
    /// is its own lineage. Checkpoints of sessions without a tenant are
    /// budgeted per lineage (see `checkpoints`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lineage: Option<String>,
}

/// The metadata format this version writes.
pub(super) const FORMAT: u32 = 2;

fn legacy_format() -> u32 {
    1
}

/// A new session id as 32 lowercase hex: 128 bits from the OS generator,
/// or in a cluster the node's id (2 bytes) and 112 random bits, so that a
/// proxy routes on the id's first four characters.
pub(super) fn new_id(node: Option<NodeId>) -> Result<String, SessionError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| SessionError::Io {
        what: "generating a session id".into(),
        source: std::io::Error::other(e.to_string()),
    })?;
    if let Some(n) = node {
        bytes[..2].copy_from_slice(&n.bytes());
    }
    Ok(hex::encode(bytes))
}

/// True for exactly 32 lowercase hex characters: an id, or the name a
/// session's files go by (its keyed hash, in the same form).
pub fn is_valid_id(id: &str) -> bool {
    prims_protocol::wire::is_session_id(id)
}

/// `id` if it is a well-formed session id, else BadId (quoted, shortened).
pub(super) fn check_id(id: &str) -> Result<&str, SessionError> {
    if is_valid_id(id) {
        Ok(id)
    } else {
        let shown: String = id.chars().take(64).collect();
        Err(SessionError::BadId(shown))
    }
}

pub(super) fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

pub(super) fn meta_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.json"))
}

pub(super) fn tmp_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!(".{name}.json.tmp"))
}

/// How hard a metadata write must hold.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Durability {
    /// fsync file and directory: survives a power cut (creation, closing).
    Durable,
    /// Rename only: survives a crash of the daemon, which is all a run
    /// marker or a last-used time needs, and spares two fsyncs per run.
    Atomic,
}

/// Writes the metadata atomically: a temporary file, rename over the old
/// one, with fsyncs when `durability` asks. Callers serialize writes per session.
pub(super) fn write(dir: &Path, meta: &Meta, durability: Durability) -> Result<(), SessionError> {
    let what = || format!("writing the metadata of session {}", meta.name);
    let text = serde_json::to_vec_pretty(meta).map_err(|e| SessionError::Io {
        what: what(),
        source: std::io::Error::other(e),
    })?;
    let tmp = tmp_path(dir, &meta.name);
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)?;
        f.write_all(&text)?;
        if durability == Durability::Durable {
            f.sync_all()?;
        }
        fs::rename(&tmp, meta_path(dir, &meta.name))?;
        if durability == Durability::Durable {
            sync_dir(dir)?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(SessionError::io(what()))
}

/// Reads `<name>.json`; a file whose name field differs from its file name
/// is an error.
pub(super) fn read(dir: &Path, name: &str) -> Result<Meta, String> {
    let path = meta_path(dir, name);
    let text = fs::read(&path).map_err(|e| e.to_string())?;
    let meta: Meta = serde_json::from_slice(&text).map_err(|e| e.to_string())?;
    if meta.name != name {
        return Err("its name field does not match its file name".to_string());
    }
    Ok(meta)
}

/// fsync of a directory, so renames and unlinks in it are durable.
pub(super) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids() {
        let id = new_id(None).unwrap();
        assert!(is_valid_id(&id), "{id}");
        assert_ne!(id, new_id(None).unwrap());
        let on3 = new_id(Some(NodeId(3))).unwrap();
        assert!(is_valid_id(&on3) && on3.starts_with("0003"), "{on3}");
        assert_eq!(NodeId::of(&on3), Some(NodeId(3)));
        for bad in [
            "",
            "../../etc",
            &id.to_uppercase(),
            &id[..31],
            &format!("{id}0"),
        ] {
            assert!(!is_valid_id(bad), "{bad}");
        }
    }
}
