//! Checkpoints of sessions, on the supervisor's disk:
//! `state_dir/checkpoints/<session name>/<id>/` holds `globals.pickle`
//! (the session's pickled globals, as its own agent wrote them), `files/`
//! (a copy of its workspace but `.prims/`) and `meta.json`. No jail ever
//! sees this directory; a rollback copies a checkpoint back into the
//! session's workspace, where only its own jail unpickles the globals.
//!
//! They are bounded per session and per tenant by count and by bytes
//! (`[branches]`), kept across restarts (the index is read back at
//! start-up) and removed with their session. A checkpoint is made in a
//! `.<id>.tmp` directory and renamed into place with its `meta.json`
//! already written, so a crash leaves either a whole one or a leftover
//! that start-up removes.

use prims_policy::Branches;
use prims_protocol::branch::CheckpointInfo;
use prims_protocol::wire::{ErrorCode, ErrorReply};
use std::collections::HashMap;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

const META: &str = "meta.json";
/// The globals inside a checkpoint's directory.
pub(crate) const GLOBALS: &str = "globals.pickle";
/// The files inside a checkpoint's directory.
pub(crate) const FILES: &str = "files";
/// A label is a note for people: this long at most.
pub(crate) const MAX_LABEL_CHARS: usize = 256;

/// Every session's checkpoints. Send + Sync.
#[derive(Debug)]
pub struct Checkpoints {
    dir: PathBuf,
    index: Mutex<Index>,
}

#[derive(Debug, Default)]
struct Index {
    /// By session name, oldest first.
    by_session: HashMap<String, Vec<Kept>>,
    /// Being made, by tenant: counted against its budget already.
    pending: HashMap<Option<String>, u32>,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Kept {
    tenant: Option<String>,
    info: CheckpointInfo,
}

/// A checkpoint being made: its directory, not yet in the index.
#[derive(Debug)]
pub struct Pending {
    pub id: String,
    pub dir: PathBuf,
    session: String,
    tenant: Option<String>,
    /// Bytes it may take, within every budget.
    pub room: u64,
}

impl Checkpoints {
    /// Opens `state_dir/checkpoints`, reading back every whole checkpoint
    /// and removing leftovers of ones cut short.
    pub fn open(state_dir: &Path) -> std::io::Result<Checkpoints> {
        let dir = state_dir.join("checkpoints");
        // Root's alone: the copies inside keep the workspace files' modes,
        // and a workspace is its session's alone.
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
        let mut index = Index::default();
        for session in std::fs::read_dir(&dir)? {
            let session = session?;
            let name = session.file_name().to_string_lossy().into_owned();
            let mut kept = Vec::new();
            for entry in std::fs::read_dir(session.path())? {
                let entry = entry?;
                let meta = std::fs::read(entry.path().join(META))
                    .ok()
                    .and_then(|b| serde_json::from_slice::<Kept>(&b).ok());
                match meta {
                    Some(k) if entry.file_name().to_string_lossy() == k.info.checkpoint_id => {
                        kept.push(k)
                    }
                    _ => remove(&entry.path()),
                }
            }
            kept.sort_by_key(|k| k.info.created);
            index.by_session.insert(name, kept);
        }
        Ok(Checkpoints {
            dir,
            index: Mutex::new(index),
        })
    }

    fn index(&self) -> std::sync::MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts a checkpoint of session `name` of `tenant`: refused when a
    /// budget is used up; else its directory, and the bytes it may take.
    pub fn begin(
        &self,
        name: &str,
        tenant: Option<&str>,
        b: &Branches,
    ) -> Result<Pending, ErrorReply> {
        let mut index = self.index();
        let mine = index.by_session.get(name).map(Vec::as_slice).unwrap_or(&[]);
        let my_bytes: u64 = mine.iter().map(|k| k.info.bytes).sum();
        if mine.len() as u64 >= u64::from(b.max_checkpoints) {
            return Err(refused(format!(
                "the session keeps {} checkpoints, its most (branches.max_checkpoints); \
                 a new one is refused",
                mine.len()
            )));
        }
        let tenant_own = tenant.map(str::to_owned);
        let (their_count, their_bytes) = index.tenant(&tenant_own);
        let their_count = their_count + u64::from(*index.pending.get(&tenant_own).unwrap_or(&0));
        if their_count >= u64::from(b.max_checkpoints_per_tenant) {
            return Err(refused(format!(
                "the tenant keeps {their_count} checkpoints, its most \
                 (branches.max_checkpoints_per_tenant); a new one is refused"
            )));
        }
        let room = (b.max_checkpoint_bytes.0.saturating_sub(my_bytes)).min(
            b.max_checkpoint_bytes_per_tenant
                .0
                .saturating_sub(their_bytes),
        );
        if room == 0 {
            return Err(refused(
                "the checkpoint byte budget (branches.max_checkpoint_bytes, or the \
                 tenant's) is used up; a new checkpoint is refused"
                    .into(),
            ));
        }
        let id = new_id().map_err(|e| internal(format!("a checkpoint id: {e}")))?;
        let dir = self.dir.join(name).join(format!(".{id}.tmp"));
        std::fs::create_dir_all(dir.join(FILES))
            .map_err(|e| internal(format!("creating a checkpoint: {e}")))?;
        *index.pending.entry(tenant_own.clone()).or_default() += 1;
        Ok(Pending {
            id,
            dir,
            session: name.to_string(),
            tenant: tenant_own,
            room,
        })
    }

    /// Keeps `p`, described by `info`, if the tenant's byte budget still
    /// holds it: checkpoints of the tenant's other sessions may have been
    /// kept while this one was copied.
    pub fn commit(
        &self,
        p: Pending,
        info: CheckpointInfo,
        b: &Branches,
    ) -> Result<CheckpointInfo, ErrorReply> {
        let theirs = self.index().tenant(&p.tenant).1;
        if theirs.saturating_add(info.bytes) > b.max_checkpoint_bytes_per_tenant.0 {
            self.abort(p);
            return Err(refused(format!(
                "the tenant's checkpoints would pass branches.max_checkpoint_bytes_per_tenant \
                 ({} bytes); nothing was kept",
                b.max_checkpoint_bytes_per_tenant.0
            )));
        }
        let kept = Kept {
            tenant: p.tenant.clone(),
            info,
        };
        let done = serde_json::to_vec(&kept)
            .map_err(std::io::Error::other)
            .and_then(|json| std::fs::write(p.dir.join(META), json))
            .and_then(|()| std::fs::rename(&p.dir, self.dir.join(&p.session).join(&p.id)));
        let mut index = self.index();
        unpend(&mut index, &p.tenant);
        if let Err(e) = done {
            drop(index);
            remove(&p.dir);
            return Err(internal(format!("keeping the checkpoint: {e}")));
        }
        index
            .by_session
            .entry(p.session.clone())
            .or_default()
            .push(kept.clone());
        Ok(kept.info)
    }

    /// Gives up `p`: its directory goes.
    pub fn abort(&self, p: Pending) {
        unpend(&mut self.index(), &p.tenant);
        remove(&p.dir);
    }

    /// The directory and description of checkpoint `id` of session `name`.
    pub fn get(&self, name: &str, id: &str) -> Result<(PathBuf, CheckpointInfo), ErrorReply> {
        let index = self.index();
        let found = index
            .by_session
            .get(name)
            .and_then(|v| v.iter().find(|k| k.info.checkpoint_id == id));
        match found {
            Some(k) => Ok((self.dir.join(name).join(id), k.info.clone())),
            None => Err(ErrorReply {
                code: ErrorCode::NotFound,
                message: format!("the session has no checkpoint {id:?}"),
            }),
        }
    }

    /// The checkpoints of session `name`, oldest first.
    pub fn list(&self, name: &str) -> Vec<CheckpointInfo> {
        self.index()
            .by_session
            .get(name)
            .map(|v| v.iter().map(|k| k.info.clone()).collect())
            .unwrap_or_default()
    }

    /// Removes every checkpoint of session `name` (it ended). Blocking.
    pub fn remove_session(&self, name: &str) {
        self.index().by_session.remove(name);
        remove(&self.dir.join(name));
    }

    /// Removes the checkpoints of every session `known` says is gone.
    /// Blocking.
    pub fn sweep(&self, known: &dyn Fn(&str) -> bool) {
        let names: Vec<String> = self.index().by_session.keys().cloned().collect();
        for name in names.into_iter().filter(|n| !known(n)) {
            tracing::info!(session = %name, "removing the checkpoints of a session that ended");
            self.remove_session(&name);
        }
    }
}

impl Index {
    /// The checkpoints `tenant` keeps, and their bytes.
    fn tenant(&self, tenant: &Option<String>) -> (u64, u64) {
        self.by_session
            .values()
            .flatten()
            .filter(|k| &k.tenant == tenant)
            .fold((0, 0), |(n, s), k| (n + 1, s + k.info.bytes))
    }
}

fn unpend(index: &mut Index, tenant: &Option<String>) {
    if let Some(n) = index.pending.get_mut(tenant) {
        *n = n.saturating_sub(1);
    }
}

/// 16 random bytes as 32 hex characters.
fn new_id() -> Result<String, getrandom::Error> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b)?;
    Ok(hex::encode(b))
}

/// Whether `id` could name a checkpoint (anything else is not looked up).
pub fn is_checkpoint_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn remove(dir: &Path) {
    // remove_dir_all never follows a symlink out of the tree.
    if let Err(e) = std::fs::remove_dir_all(dir) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(dir = %dir.display(), error = %e, "could not remove a checkpoint");
        }
    }
}

fn refused(message: String) -> ErrorReply {
    ErrorReply {
        code: ErrorCode::Quota,
        message,
    }
}

fn internal(message: String) -> ErrorReply {
    ErrorReply {
        code: ErrorCode::Internal,
        message,
    }
}
