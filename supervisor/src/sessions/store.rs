//! The session store: live sessions in memory, each backed by its files.

use super::error::SessionError;
use super::meta::{self, check_id, unix_secs};
use super::policy::SessionPolicy;
use super::session::{lock, Session};
use super::shared::Shared;
use super::uids::UidPool;
use super::{history, layout, recover, run_flag};
use prims_protocol::history::{HistoryCell, HistoryPage};
use prims_protocol::node::NodeId;
use prims_protocol::wire::{NotRestored, SessionInfo};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// `touch` writes last_used to disk at most this often per session.
const PERSIST_EVERY: Duration = Duration::from_secs(5);

/// The largest workspace a fork template's place reserves (less when
/// `sessions.disk_quota` is less): an ext4 image's own bookkeeping fits
/// with room to spare, and a template writes nothing else.
pub const TEMPLATE_HOME_BYTES: u64 = 64 << 20;

/// Sessions and their workspaces. Send + Sync; share it in an `Arc`.
#[derive(Debug)]
pub struct SessionStore {
    shared: Arc<Shared>,
    /// In a cluster, this node's id, which begins every new session id.
    node: Option<NodeId>,
}

impl SessionStore {
    /// Opens (creating if needed) `state_dir/sessions` and loads every
    /// session: images that are not mounted are checked and mounted again,
    /// a run that was in flight is marked `last_run_lost`, half-created
    /// sessions are removed, and sessions whose image vanished are dropped.
    pub fn open(state_dir: &Path, policy: &SessionPolicy) -> Result<Self, SessionError> {
        let store = SessionStore {
            shared: recover::open(state_dir, policy)?,
            node: None,
        };
        tracing::info!(sessions = store.len(), "sessions loaded");
        Ok(store)
    }

    /// New session ids begin with `node` (a cluster node's id).
    pub fn with_node(mut self, node: Option<NodeId>) -> Self {
        self.node = node;
        self
    }

    /// A new session with its own workspace and host uid.
    pub fn create(&self, tenant: Option<String>) -> Result<SessionInfo, SessionError> {
        if let Some(t) = &tenant {
            super::session::check_tenant(t)?;
        }
        let (id, session) = self.make(tenant, Place::Session)?;
        let info = session.info(&id);
        lock(&self.shared.inner)
            .live
            .insert(session.name.clone(), Arc::new(session));
        Ok(info)
    }

    /// A session made ahead of need for the warm pool: its workspace and
    /// uid exist and count against `max_sessions`, but it has no tenant,
    /// nobody knows its id, and a restart removes it. Hand it out with
    /// [`SessionStore::adopt`], or give it up with [`SessionStore::discard`].
    pub fn create_spare(&self) -> Result<Spare, SessionError> {
        let (id, session) = self.make(None, Place::Spare)?;
        lock(&self.shared.inner).spares += 1;
        Ok(Spare {
            id,
            session,
            counted: true,
        })
    }

    /// A place for a fork template: a spare's uid and a workspace, which no
    /// session is ever made of. Not counted against
    /// `sessions.max_sessions` (`interpreters.max_templates` bounds the
    /// templates); its workspace is [`TEMPLATE_HOME_BYTES`] at most, since
    /// a template runs no one's code and writes nothing there (its `/tmp`
    /// is a tmpfs, and each child binds its own session's workspace).
    pub fn create_template_home(&self) -> Result<Spare, SessionError> {
        let (id, session) = self.make(None, Place::Template)?;
        Ok(Spare {
            id,
            session,
            counted: false,
        })
    }

    /// Makes `spare` a live session of `tenant`.
    pub fn adopt(&self, spare: Spare, tenant: Option<String>) -> Result<SessionInfo, SessionError> {
        if let Some(t) = &tenant {
            super::session::check_tenant(t)?;
        }
        let sh = &self.shared;
        if !spare.counted {
            let e = SessionError::Workspace("a fork template's place is never a session".into());
            self.discard(spare);
            return Err(e);
        }
        let Spare { id, session, .. } = spare;
        let adopted = session.update(&sh.dir, meta::Durability::Atomic, |m| {
            m.spare = false;
            m.tenant = tenant;
            m.last_used = unix_secs(SystemTime::now());
        });
        if let Err(e) = adopted {
            self.discard(Spare {
                id,
                session,
                counted: true,
            });
            return Err(e);
        }
        let m = lock(&session.state).meta.clone();
        let s = Session::from_meta(&sh.dir, m);
        let info = s.info(&id);
        let mut inner = lock(&sh.inner);
        inner.spares -= 1;
        inner.live.insert(s.name.clone(), Arc::new(s));
        Ok(info)
    }

    /// Removes a spare's files and frees its uid.
    pub fn discard(&self, spare: Spare) {
        let sh = &self.shared;
        let s = spare.session;
        let removed = layout::teardown(&sh.dir, &s.name);
        let mut inner = lock(&sh.inner);
        if spare.counted {
            inner.spares -= 1;
        }
        match removed {
            Ok(()) => inner.uids.release(s.host_uid),
            Err(e) => tracing::error!(session = %s.name, error = %e,
                "could not remove a spare; its uid stays out of use until the next start"),
        }
    }

    /// The files of a new session, counted while they are made.
    fn make(
        &self,
        tenant: Option<String>,
        place: Place,
    ) -> Result<(String, Session), SessionError> {
        let sh = &self.shared;
        let spare = place != Place::Session;
        let (policy, uid) = {
            let mut inner = lock(&sh.inner);
            let max = inner.policy.max_sessions;
            // A spare never takes the last place or the last room: a real
            // session must still fit beside it. A template takes no place.
            let headroom = usize::from(spare);
            let taken = inner.live.len() + inner.creating + inner.spares;
            if place != Place::Template && taken + headroom >= max {
                return Err(SessionError::TooMany(max));
            }
            let (base, count) = (inner.policy.uid_base, inner.policy.uid_count);
            let uid = inner
                .uids
                .allocate(base, count)
                .ok_or(SessionError::NoUid(UidPool::capacity(count)))?;
            let own = match place {
                Place::Template => TEMPLATE_HOME_BYTES.min(inner.policy.disk_quota),
                Place::Session | Place::Spare => inner.policy.disk_quota,
            };
            if let Err(e) = room_for(&sh.dir, &inner.policy, inner.creating + headroom, own) {
                inner.uids.release(uid);
                return Err(e);
            }
            inner.creating += 1;
            let mut policy = inner.policy.clone();
            policy.disk_quota = own;
            (policy, uid)
        };
        let started = Instant::now();
        let result =
            super::session::build(&sh.dir, &sh.key, uid, &policy, tenant, spare, self.node);
        let mut inner = lock(&sh.inner);
        inner.creating -= 1;
        match result {
            Ok((id, session)) => {
                tracing::info!(session = %session.name, uid, spare, ms = started.elapsed().as_millis() as u64, "session created");
                Ok((id, session))
            }
            Err((None, e)) => {
                inner.uids.release(uid);
                Err(e)
            }
            Err((Some(name), e)) => {
                drop(inner);
                tracing::error!(session = %name, error = %e, "creating a session failed");
                let cleaned = layout::teardown(&sh.dir, &name);
                let mut inner = lock(&sh.inner);
                match cleaned {
                    Ok(()) => inner.uids.release(uid),
                    Err(c) => tracing::error!(session = %name, uid, error = %c,
                        "could not remove a failed session; its uid stays out of use"),
                }
                Err(e)
            }
        }
    }

    /// The live session `id` of `tenant`. Counts as use (see `touch`), and
    /// mounts a quota image again if it was unmounted behind our back, so a
    /// run never writes into the bare directory.
    pub fn get(&self, id: &str, tenant: Option<&str>) -> Result<Arc<Session>, SessionError> {
        let s = self.lookup(id, tenant)?;
        if s.disk_quota > 0 {
            // Under the state lock, which a close holds while removing files.
            let _st = lock(&s.state);
            if s.is_closed() {
                return Err(SessionError::NotFound);
            }
            match layout::ensure_mounted(&self.shared.dir, &s.name) {
                Ok(true) => {
                    tracing::warn!(session = %s.name, "workspace image was not mounted; mounted it again")
                }
                Ok(false) => {}
                Err(e) => return Err(SessionError::Workspace(e)),
            }
        }
        self.touch_session(&s);
        Ok(s)
    }

    pub fn info(&self, id: &str, tenant: Option<&str>) -> Result<SessionInfo, SessionError> {
        Ok(self.lookup(id, tenant)?.info(id))
    }

    /// The name files and logs use for session `id` (see `key`).
    pub fn name_of(&self, id: &str) -> Result<String, SessionError> {
        Ok(self.shared.key.name_of(check_id(id)?))
    }

    /// Ends a session: unmounts and deletes its image, workspace and
    /// metadata, then frees its uid. The session is gone for callers at
    /// once; if a run holds its `run_lock`, the files are removed by a
    /// helper thread as soon as the run releases it (the uid is freed only
    /// then). A failed removal is retried by `sweep` and on the next start.
    pub fn close(&self, id: &str, tenant: Option<&str>) -> Result<(), SessionError> {
        let s = self.begin_closing(id, tenant)?;
        let attempt = match s.run_lock.try_lock() {
            Ok(guard) => Some(self.shared.finish_close(&s, guard)),
            Err(_) => None,
        };
        match attempt {
            Some(result) => result,
            None => {
                tracing::info!(session = %s.name, "closing after the current run ends");
                self.finish_closing(s, || {});
                Ok(())
            }
        }
    }

    /// The first half of [`SessionStore::close`]: from now on the session
    /// is gone for every request (`NotFound`); its files stay until
    /// [`SessionStore::finish_closing`].
    pub fn begin_closing(
        &self,
        id: &str,
        tenant: Option<&str>,
    ) -> Result<Arc<Session>, SessionError> {
        let name = self.name_of(id)?;
        let s = {
            let mut inner = lock(&self.shared.inner);
            match inner.live.get(&name) {
                Some(s) if s.belongs_to(tenant) => {}
                _ => return Err(SessionError::NotFound),
            }
            let s = inner.live.remove(&name).ok_or(SessionError::NotFound)?;
            inner.closing.insert(name, s.clone());
            s
        };
        self.shared.begin_close(&s);
        Ok(s)
    }

    /// The second half, on a thread of its own: `before` (ending the
    /// session's interpreter), then, once no run holds the session, its
    /// files go and its uid is free again. A failure is logged, and the
    /// start-up sweep finishes it.
    pub fn finish_closing(&self, s: Arc<Session>, before: impl FnOnce() + Send + 'static) {
        let shared = self.shared.clone();
        std::thread::spawn(move || {
            before();
            let guard = s.run_lock.blocking_lock();
            let _ = shared.finish_close(&s, guard);
        });
    }

    /// Marks the session used now. The metadata is written atomically, at
    /// most every 5 seconds per session.
    pub fn touch(&self, s: &Session) {
        if !s.is_closed() {
            self.touch_session(s);
        }
    }

    /// Records that a run starts, on disk, before it does: a crash during
    /// the run then shows as `last_run_lost` after the restart. The
    /// metadata is rewritten only when it changes (a first run, or the one
    /// after a lost run); the in-flight mark is `run_flag`'s byte. True
    /// when the run before this one was lost: this run's answer says so,
    /// once.
    pub fn run_started(&self, s: &Session) -> Result<bool, SessionError> {
        if s.is_closed() {
            return Err(SessionError::NotFound);
        }
        let (stale, lost) = {
            let st = lock(&s.state);
            let m = &st.meta;
            (
                !m.ran || m.last_run_lost || m.run_in_flight,
                m.last_run_lost,
            )
        };
        if stale {
            s.update(&self.shared.dir, meta::Durability::Atomic, |m| {
                m.run_in_flight = false;
                m.last_run_lost = false;
                m.ran = true;
            })?;
        }
        run_flag::raise(&self.shared.dir, &s.name).map_err(SessionError::io(format!(
            "marking a run of session {} in flight",
            s.name
        )))?;
        Ok(lost)
    }

    /// Records a finished run in the session's history, dropping the
    /// oldest runs past the policy's bounds. A closed session records
    /// nothing (its files are about to go).
    pub fn record_run(&self, s: &Session, cell: HistoryCell) -> Result<(), SessionError> {
        if s.is_closed() {
            return Ok(());
        }
        let mut tally = lock(&s.state).history.take();
        let done = history::append(
            &self.shared.dir,
            &s.name,
            cell,
            self.history_bounds(),
            &mut tally,
        );
        lock(&s.state).history = tally;
        done
    }

    /// A page of the recorded runs of session `id`, from run number `from`.
    pub fn history(
        &self,
        id: &str,
        tenant: Option<&str>,
        from: u64,
    ) -> Result<HistoryPage, SessionError> {
        let s = self.lookup(id, tenant)?;
        history::page(&self.shared.dir, &s.name, from, self.history_bounds())
    }

    fn history_bounds(&self) -> history::Bounds {
        let inner = lock(&self.shared.inner);
        history::Bounds {
            cells: inner.policy.history_cells,
            bytes: inner.policy.history_bytes,
        }
    }

    pub fn run_finished(&self, s: &Session) {
        let known = {
            let inner = lock(&self.shared.inner);
            inner.live.contains_key(&s.name) || inner.closing.contains_key(&s.name)
        };
        if !known {
            return;
        }
        if let Err(e) = run_flag::lower(&self.shared.dir, &s.name) {
            tracing::warn!(session = %s.name, error = %e, "could not record the end of a run");
        }
    }

    /// Closes every session idle for longer than `idle_ttl` at `now`, except
    /// those whose `run_lock` is held, and retries unfinished closes.
    /// `before_removal` sees each one's name once it is closed to callers
    /// and before its files go (its interpreter must end first). Returns
    /// the names of those it closed.
    pub fn sweep(&self, now: SystemTime, before_removal: &dyn Fn(&str)) -> Vec<String> {
        recover::sweep(&self.shared, now, before_removal)
    }

    /// Records, durably, that the globals of session `name`'s interpreter
    /// were saved in its workspace at `at` (Unix seconds), and which could
    /// not be: its first interpreter after a restart, even one after a
    /// crash, restores them.
    pub fn record_saved_globals(
        &self,
        name: &str,
        unsaved: Vec<NotRestored>,
        at: u64,
    ) -> Result<(), SessionError> {
        let s = lock(&self.shared.inner).live.get(name).cloned();
        let Some(s) = s else {
            return Ok(());
        };
        s.update(&self.shared.dir, meta::Durability::Atomic, |m| {
            m.saved_globals = Some(unsaved);
            m.saved_at = Some(at);
        })
    }

    /// What the last save of session `s`'s globals left for its next
    /// interpreter, if any: the globals it could not save, with why, and
    /// when it was made. The record stays until a newer save or
    /// [`forget_saved_globals`](Self::forget_saved_globals) replaces it, so
    /// that a second crash still finds it.
    pub fn saved_globals(&self, s: &Session) -> Option<(Vec<NotRestored>, Option<u64>)> {
        let st = lock(&s.state);
        let saved = st.meta.saved_globals.clone()?;
        Some((saved, st.meta.saved_at))
    }

    /// Session `s`'s interpreter starts without the saved globals (a
    /// `fresh: true` call, a reset): no restart may bring them back.
    pub fn forget_saved_globals(&self, s: &Session) {
        if lock(&s.state).meta.saved_globals.is_none() {
            return;
        }
        if let Err(e) = s.update(&self.shared.dir, meta::Durability::Atomic, |m| {
            m.saved_globals = None;
            m.saved_at = None;
        }) {
            tracing::warn!(session = %s.name, error = %e, "could not clear the record of saved globals");
        }
    }

    /// Records that session `s`, a branch, belongs to the fork tree that
    /// grew from the session named `lineage`. Lost in a crash before the
    /// rename, it leaves `s` its own lineage: a budget of its own, still
    /// bounded per session and on the node.
    pub fn set_lineage(&self, s: &Session, lineage: &str) -> Result<(), SessionError> {
        s.update(&self.shared.dir, meta::Durability::Atomic, |m| {
            m.lineage = Some(lineage.to_string());
        })
    }

    /// The placeholder of secret `secret` in session `s` (and its
    /// lineage's other sessions).
    pub fn placeholder(&self, s: &Session, secret: &str) -> String {
        self.shared.key.placeholder(&s.lineage(), secret)
    }

    /// Whether a session of this name (see `key`) is live or closing.
    pub fn has(&self, name: &str) -> bool {
        let inner = lock(&self.shared.inner);
        inner.live.contains_key(name) || inner.closing.contains_key(name)
    }

    /// Live sessions.
    pub fn len(&self) -> usize {
        lock(&self.shared.inner).live.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The state directory whose `sessions` directory this store keeps.
    pub fn state_dir(&self) -> &Path {
        self.shared.dir.parent().unwrap_or(&self.shared.dir)
    }

    /// Takes a reloaded policy: TTL and limits apply at once; quota size
    /// and mode apply to sessions created from now on.
    pub fn update_policy(&self, policy: &SessionPolicy) {
        lock(&self.shared.inner).policy = policy.clone();
    }

    /// Another tenant's session looks exactly like a missing one.
    fn lookup(&self, id: &str, tenant: Option<&str>) -> Result<Arc<Session>, SessionError> {
        let name = self.name_of(id)?;
        lock(&self.shared.inner)
            .live
            .get(&name)
            .filter(|s| s.belongs_to(tenant))
            .cloned()
            .ok_or(SessionError::NotFound)
    }

    fn touch_session(&self, s: &Session) {
        let mut st = lock(&s.state);
        st.last_used = SystemTime::now();
        st.meta.last_used = unix_secs(st.last_used);
        if st.persisted.elapsed() >= PERSIST_EVERY {
            st.persisted = Instant::now();
            if let Err(e) = meta::write(&self.shared.dir, &st.meta, meta::Durability::Atomic) {
                tracing::warn!(session = %s.name, error = %e, "could not record last use");
            }
        }
    }
}

/// A new workspace reserves its whole quota (`own`); refuse it while the
/// disk, less what must stay free and what `others` session workspaces
/// being created (or kept room for) will take, cannot hold that.
fn room_for(
    dir: &Path,
    policy: &SessionPolicy,
    others: usize,
    own: u64,
) -> Result<(), SessionError> {
    if policy.quota != super::policy::QuotaMode::Loop {
        return Ok(());
    }
    let free = layout::free_bytes(dir);
    let pending = policy
        .disk_quota
        .saturating_mul(others as u64)
        .saturating_add(own);
    if free < pending.saturating_add(policy.min_free_disk) {
        return Err(SessionError::NoDisk {
            quota: own,
            keep: policy.min_free_disk,
            free,
        });
    }
    Ok(())
}

/// A session made for the warm pool; see [`SessionStore::create_spare`]
/// (or a fork template's place, [`SessionStore::create_template_home`]).
#[derive(Debug)]
pub struct Spare {
    id: String,
    session: Session,
    /// It takes a place under `sessions.max_sessions` (a pool's spare).
    counted: bool,
}

/// What a new session's files are made for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Session,
    Spare,
    Template,
}

impl Spare {
    /// What files and logs call it.
    pub fn name(&self) -> &str {
        &self.session.name
    }

    pub fn workspace(&self) -> &Path {
        &self.session.workspace
    }

    pub fn host_uid(&self) -> u32 {
        self.session.host_uid
    }
}
