//! Checkpoints of sessions, on the supervisor's disk:
//! `state_dir/checkpoints/<session name>/<id>/` holds `globals.pickle`
//! (the session's pickled globals, as its own agent wrote them), `files/`
//! (a copy of its workspace but `.prims/`) and `meta.json`. No jail ever
//! sees this directory; a rollback copies a checkpoint back into the
//! session's workspace, where only its own jail unpickles the globals.
//!
//! They are bounded (`[branches]`) by count, by bytes and by inodes, each
//! charged what it really takes of the state directory's filesystem (see
//! `fsops::copy`): per session, per [`Account`] (a tenant, or a lineage)
//! and on the whole node. They are kept across restarts (the index is read
//! back at start-up) and removed with their session. A checkpoint is made
//! in a `.<id>.tmp` directory and renamed into place with its `meta.json`
//! already written, so a crash leaves either a whole one or a leftover
//! that start-up removes.

use crate::fsops::{CopyLimits, Usage};
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
/// Entries a checkpoint makes beside the copies: its directory, `files/`
/// and `meta.json`.
pub(crate) const OWN_ENTRIES: u64 = 3;

/// Whose budget (`branches.max_checkpoint*_per_tenant`) a checkpoint
/// counts against, beside its session's and the node's.
///
/// With bearer tokens, its tenant's. Without, every client is the same
/// tenant (None), and one tenant budget for all would let one client's
/// checkpoints refuse everyone else's first. The supervisor cannot tell
/// clients apart, but it knows which sessions one caller made from
/// another: a session opened as such is a lineage of its own, and a
/// branch (`fork_session`) belongs to its source's. So tenant None is
/// budgeted per lineage: forking cannot multiply a budget, and a client
/// filling its lineage's leaves another's untouched. A caller may open
/// many sessions, each a lineage; `sessions.max_sessions`, the per-session
/// budgets and the node's totals (`max_checkpoint_*_total`, and the
/// disk's free bytes and inodes) still bound them all together.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Account {
    Tenant(String),
    /// The name of the session the lineage grew from.
    Lineage(String),
}

impl Account {
    pub fn of(tenant: Option<&str>, lineage: &str) -> Account {
        match tenant {
            Some(t) => Account::Tenant(t.to_string()),
            None => Account::Lineage(lineage.to_string()),
        }
    }

    fn whose(&self) -> &'static str {
        match self {
            Account::Tenant(_) => "the tenant",
            Account::Lineage(_) => {
                "the session's lineage (it, the session it was forked from and their \
                 branches: without bearer tokens the tenant budgets apply per lineage)"
            }
        }
    }
}

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
    /// Being made (session and account): counted against the budgets of
    /// checkpoints already.
    pending: Vec<(String, Account)>,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Kept {
    tenant: Option<String>,
    /// Its session's lineage; absent in checkpoints made before lineages
    /// were kept, read back as the session's own.
    #[serde(default)]
    lineage: Option<String>,
    /// Its inodes on the state directory's filesystem; absent (0) in
    /// checkpoints made before inodes were counted.
    #[serde(default)]
    inodes: u64,
    info: CheckpointInfo,
}

impl Kept {
    fn account(&self) -> Account {
        Account::of(
            self.tenant.as_deref(),
            self.lineage.as_deref().unwrap_or(""),
        )
    }

    fn cost(&self) -> Usage {
        Usage {
            bytes: self.info.bytes,
            inodes: self.inodes,
        }
    }
}

/// A checkpoint being made: its directory, not yet in the index.
#[derive(Debug)]
pub struct Pending {
    pub id: String,
    pub dir: PathBuf,
    session: String,
    tenant: Option<String>,
    account: Account,
    /// What it may take, within every budget.
    pub room: CopyLimits,
    /// The keys whose budgets leave the least bytes and inodes: what a
    /// copy past `room` is refused by.
    pub bound_by: (&'static str, &'static str),
}

/// One budget: its policy key, what it allows and what is held of it.
struct Meter {
    key: &'static str,
    whose: &'static str,
    max: u64,
    held: u64,
}

impl Meter {
    fn left(&self) -> u64 {
        self.max.saturating_sub(self.held)
    }
}

/// The budgets a checkpoint of one session counts against: counts,
/// bytes and inodes, each the session's, its account's (and the node's).
struct Meters {
    counts: [Meter; 2],
    bytes: [Meter; 3],
    inodes: [Meter; 3],
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
            let kept = read_session(&session.path(), &name)?;
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

    /// Starts a checkpoint of session `name` (of `tenant`, grown from
    /// `lineage`): refused when a budget is used up; else its directory,
    /// and what it may take.
    pub fn begin(
        &self,
        name: &str,
        (tenant, lineage): (Option<&str>, &str),
        b: &Branches,
    ) -> Result<Pending, ErrorReply> {
        let account = Account::of(tenant, lineage);
        let mut index = self.index();
        let m = index.meters(name, &account, b);
        for c in &m.counts {
            if c.left() == 0 {
                return Err(refused(format!(
                    "{} keeps {} checkpoints, its most ({}); a new one is refused",
                    c.whose, c.held, c.key
                )));
            }
        }
        let (bytes, inodes) = (tightest(&m.bytes), tightest(&m.inodes));
        for (t, what) in [(bytes, "byte"), (inodes, "inode")] {
            if t.left() == 0 {
                return Err(refused(format!(
                    "the checkpoint {what} budget of {} ({}) is used up; a new checkpoint is \
                     refused",
                    t.whose, t.key
                )));
            }
        }
        let room = CopyLimits {
            max_bytes: bytes.left(),
            max_inodes: inodes.left(),
        };
        let bound_by = (bytes.key, inodes.key);
        let id = new_id().map_err(|e| internal(format!("a checkpoint id: {e}")))?;
        let dir = self.dir.join(name).join(format!(".{id}.tmp"));
        std::fs::create_dir_all(dir.join(FILES))
            .map_err(|e| internal(format!("creating a checkpoint: {e}")))?;
        index.pending.push((name.to_string(), account.clone()));
        Ok(Pending {
            id,
            dir,
            session: name.to_string(),
            tenant: tenant.map(str::to_owned),
            account,
            room,
            bound_by,
        })
    }

    /// Keeps `p`, described by `info` and taking `inodes`, if its budgets
    /// still hold it: checkpoints of other sessions may have been kept
    /// while this one was copied.
    pub fn commit(
        &self,
        p: Pending,
        (info, inodes): (CheckpointInfo, u64),
        b: &Branches,
    ) -> Result<CheckpointInfo, ErrorReply> {
        let kept = Kept {
            tenant: p.tenant.clone(),
            lineage: match &p.account {
                Account::Lineage(l) => Some(l.clone()),
                Account::Tenant(_) => None,
            },
            inodes,
            info,
        };
        // Held from the check to the push: two checkpoints kept side by
        // side cannot both take the last room of a budget.
        let mut index = self.index();
        if let Some(why) = passed(&index.meters(&p.session, &p.account, b), kept.cost()) {
            unpend(&mut index, &p);
            drop(index);
            remove(&p.dir);
            return Err(refused(format!("{why}; nothing was kept")));
        }
        let done = serde_json::to_vec(&kept)
            .map_err(std::io::Error::other)
            .and_then(|json| std::fs::write(p.dir.join(META), json))
            .and_then(|()| std::fs::rename(&p.dir, self.dir.join(&p.session).join(&p.id)));
        unpend(&mut index, &p);
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
        unpend(&mut self.index(), &p);
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
    /// What checkpoints `keep` takes, and how many.
    fn held(&self, keep: impl Fn(&str, &Kept) -> bool) -> (u64, Usage) {
        let mut n = 0;
        let mut u = Usage::default();
        for (name, kept) in &self.by_session {
            for k in kept.iter().filter(|k| keep(name, k)) {
                n += 1;
                u.bytes = u.bytes.saturating_add(k.info.bytes);
                u.inodes = u.inodes.saturating_add(k.inodes);
            }
        }
        (n, u)
    }

    fn meters(&self, name: &str, account: &Account, b: &Branches) -> Meters {
        let (mine, my) = self.held(|n, _| n == name);
        let (theirs, their) = self.held(|_, k| &k.account() == account);
        let (_, all) = self.held(|_, _| true);
        let pending = |f: &dyn Fn(&(String, Account)) -> bool| {
            self.pending.iter().filter(|p| f(p)).count() as u64
        };
        let whose = account.whose();
        let meter = |key, whose, max, held| Meter {
            key,
            whose,
            max,
            held,
        };
        let session = "the session";
        let node = "this node";
        Meters {
            counts: [
                meter(
                    "branches.max_checkpoints",
                    session,
                    u64::from(b.max_checkpoints),
                    mine + pending(&|p| p.0 == name),
                ),
                meter(
                    "branches.max_checkpoints_per_tenant",
                    whose,
                    u64::from(b.max_checkpoints_per_tenant),
                    theirs + pending(&|p| &p.1 == account),
                ),
            ],
            bytes: [
                meter(
                    "branches.max_checkpoint_bytes",
                    session,
                    b.max_checkpoint_bytes.0,
                    my.bytes,
                ),
                meter(
                    "branches.max_checkpoint_bytes_per_tenant",
                    whose,
                    b.max_checkpoint_bytes_per_tenant.0,
                    their.bytes,
                ),
                meter(
                    "branches.max_checkpoint_bytes_total",
                    node,
                    b.max_checkpoint_bytes_total.0,
                    all.bytes,
                ),
            ],
            inodes: [
                meter(
                    "branches.max_checkpoint_inodes",
                    session,
                    b.max_checkpoint_inodes,
                    my.inodes,
                ),
                meter(
                    "branches.max_checkpoint_inodes_per_tenant",
                    whose,
                    b.max_checkpoint_inodes_per_tenant,
                    their.inodes,
                ),
                meter(
                    "branches.max_checkpoint_inodes_total",
                    node,
                    b.max_checkpoint_inodes_total,
                    all.inodes,
                ),
            ],
        }
    }
}

/// The budget that leaves the least.
fn tightest(meters: &[Meter; 3]) -> &Meter {
    meters
        .iter()
        .fold(&meters[0], |a, m| if m.left() < a.left() { m } else { a })
}

/// Why `cost` does not fit in `m`, if it does not.
fn passed(m: &Meters, cost: Usage) -> Option<String> {
    let over = |meters: &[Meter], n: u64, unit: &str| {
        meters
            .iter()
            .find(|m| m.held.saturating_add(n) > m.max)
            .map(|m| {
                format!(
                    "the checkpoint ({n} {unit}) would pass the budget of {} ({}, {} {unit}, \
                 {} held)",
                    m.whose, m.key, m.max, m.held
                )
            })
    };
    over(&m.bytes, cost.bytes, "bytes").or_else(|| over(&m.inodes, cost.inodes, "inodes"))
}

/// The whole checkpoints of the session `name` under `dir`; leftovers of
/// ones cut short are removed.
fn read_session(dir: &Path, name: &str) -> std::io::Result<Vec<Kept>> {
    let mut kept = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = std::fs::read(entry.path().join(META))
            .ok()
            .and_then(|b| serde_json::from_slice::<Kept>(&b).ok());
        match meta {
            Some(mut k) if entry.file_name().to_string_lossy() == k.info.checkpoint_id => {
                k.lineage.get_or_insert_with(|| name.to_string());
                kept.push(k)
            }
            _ => remove(&entry.path()),
        }
    }
    kept.sort_by_key(|k| k.info.created);
    Ok(kept)
}

fn unpend(index: &mut Index, p: &Pending) {
    if let Some(i) = index
        .pending
        .iter()
        .position(|(s, a)| s == &p.session && a == &p.account)
    {
        index.pending.swap_remove(i);
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

#[cfg(test)]
#[path = "checkpoints/tests.rs"]
mod tests;
