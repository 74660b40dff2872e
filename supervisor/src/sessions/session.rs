//! One session in memory: its name, run lock and metadata.

use super::error::SessionError;
use super::key::SessionKey;
use super::layout;
use super::meta::{self, unix_secs, Meta};
use super::policy::SessionPolicy;
use prims_protocol::node::NodeId;
use prims_protocol::wire::SessionInfo;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One live session. Hold `run_lock` for the whole of a run: runs in one
/// session are serialized, and neither `sweep` nor `close` removes files
/// while it is held.
#[derive(Debug)]
pub struct Session {
    /// The keyed hash of the session id: what files, logs and the audit
    /// log call the session. The id itself is not kept.
    pub name: String,
    pub tenant: Option<String>,
    /// The workspace root, bound at /workspace in the jail.
    pub workspace: PathBuf,
    pub host_uid: u32,
    pub run_lock: tokio::sync::Mutex<()>,
    /// Bytes; 0 when the quota is not enforced.
    pub disk_quota: u64,
    pub(super) state: Mutex<State>,
    pub(super) closed: AtomicBool,
    /// Loaded at start-up with code run before: its interpreter was lost
    /// to the restart.
    pub ran_before_restart: bool,
}

#[derive(Debug)]
pub(super) struct State {
    pub meta: Meta,
    pub last_used: SystemTime,
    pub persisted: Instant,
    /// What the history file holds, once an append has read it.
    pub history: Option<super::history::Tally>,
}

impl Session {
    pub(super) fn from_meta(dir: &Path, meta: Meta) -> Session {
        let ran_before_restart = meta.ran;
        Session {
            name: meta.name.clone(),
            tenant: meta.tenant.clone(),
            workspace: layout::workspace(dir, &meta.name),
            host_uid: meta.host_uid,
            run_lock: tokio::sync::Mutex::new(()),
            disk_quota: meta.disk_quota,
            state: Mutex::new(State {
                history: None,
                last_used: UNIX_EPOCH + Duration::from_secs(meta.last_used),
                meta,
                persisted: Instant::now(),
            }),
            closed: AtomicBool::new(false),
            ran_before_restart,
        }
    }

    /// True once the session was closed; a run that got this `Session`
    /// before should give up.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Only the tenant that opened a session may use it.
    pub(crate) fn belongs_to(&self, tenant: Option<&str>) -> bool {
        self.tenant.as_deref() == tenant
    }

    /// The name of the session this one's fork tree grew from: its own
    /// unless it is a branch.
    pub fn lineage(&self) -> String {
        lock(&self.state)
            .meta
            .lineage
            .clone()
            .unwrap_or_else(|| self.name.clone())
    }

    pub fn last_used(&self) -> SystemTime {
        lock(&self.state).last_used
    }

    /// What the wire calls session `id` (this session's id: the caller
    /// knows it; we do not).
    pub(super) fn info(&self, id: &str) -> SessionInfo {
        let (created, last_used, last_run_lost) = {
            let st = lock(&self.state);
            (st.meta.created, st.last_used, st.meta.last_run_lost)
        };
        SessionInfo {
            session_id: id.to_string(),
            tenant: self.tenant.clone(),
            created,
            last_used: unix_secs(last_used),
            // Outside the lock: without a quota image this is a walk.
            disk_used_bytes: crate::fsops::disk_used(&self.workspace),
            disk_quota_bytes: self.disk_quota,
            last_run_lost,
        }
    }

    /// Changes the metadata and writes it out at once.
    pub(super) fn update(
        &self,
        dir: &Path,
        durability: meta::Durability,
        f: impl FnOnce(&mut Meta),
    ) -> Result<(), SessionError> {
        let mut st = lock(&self.state);
        f(&mut st.meta);
        st.persisted = Instant::now();
        meta::write(dir, &st.meta, durability)
    }
}

const MAX_TENANT_BYTES: usize = 256;

pub(super) fn check_tenant(t: &str) -> Result<(), SessionError> {
    if t.len() > MAX_TENANT_BYTES {
        return Err(SessionError::BadTenant("longer than 256 bytes"));
    }
    if t.chars().any(char::is_control) {
        return Err(SessionError::BadTenant("contains a control character"));
    }
    Ok(())
}

/// Makes the files of a new session; returns its id and the session. On
/// failure, the name to clean up once its directory exists (never the name
/// of a directory we did not create). A `spare` has no tenant yet.
pub(super) fn build(
    dir: &Path,
    key: &SessionKey,
    uid: u32,
    policy: &SessionPolicy,
    tenant: Option<String>,
    spare: bool,
    node: Option<NodeId>,
) -> Result<(String, Session), (Option<String>, SessionError)> {
    let id = meta::new_id(node).map_err(|e| (None, e))?;
    let name = key.name_of(&id);
    layout::create_dir(dir, &name).map_err(|e| (None, e))?;
    let fail = |e| (Some(name.clone()), e);
    let quota = layout::build(
        dir,
        &name,
        uid,
        policy.quota,
        policy.disk_quota,
        policy.min_free_disk,
    )
    .map_err(fail)?;
    let now = SystemTime::now();
    let m = Meta {
        name: name.clone(),
        format: meta::FORMAT,
        tenant,
        created: unix_secs(now),
        last_used: unix_secs(now),
        host_uid: uid,
        disk_quota: quota,
        run_in_flight: false,
        last_run_lost: false,
        closing: false,
        spare,
        ran: false,
        saved_globals: None,
        saved_at: None,
        lineage: None,
    };
    meta::write(dir, &m, meta::Durability::Durable).map_err(fail)?;
    let s = Session::from_meta(dir, m);
    lock(&s.state).last_used = now;
    Ok((id, s))
}
