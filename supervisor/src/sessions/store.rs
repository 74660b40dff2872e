//! The session store: live sessions in memory, each backed by its files.

use super::meta::{self, check_id, unix_secs};
pub(super) use super::session::{lock, Session};
use super::uids::UidPool;
use super::{layout, SessionError, SessionPolicy};
use prims_protocol::wire::SessionInfo;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// `touch` writes last_used to disk at most this often per session.
const PERSIST_EVERY: Duration = Duration::from_secs(5);

/// Sessions and their workspaces. Send + Sync; share it in an `Arc`.
#[derive(Debug)]
pub struct SessionStore {
    pub(super) shared: Arc<Shared>,
}

#[derive(Debug)]
pub(super) struct Shared {
    /// `state_dir/sessions`.
    pub dir: PathBuf,
    pub inner: Mutex<Inner>,
}

#[derive(Debug)]
pub(super) struct Inner {
    pub policy: SessionPolicy,
    pub live: HashMap<String, Arc<Session>>,
    /// Closed, but their files are not all gone yet (a run still held the
    /// lock, or removal failed): their uids stay taken.
    pub closing: HashMap<String, Arc<Session>>,
    pub creating: usize,
    pub uids: UidPool,
}

impl SessionStore {
    /// Opens (creating if needed) `state_dir/sessions` and loads every
    /// session: images that are not mounted are checked and mounted again,
    /// a run that was in flight is marked `last_run_lost`, half-created
    /// sessions are removed, and sessions whose image vanished are dropped.
    pub fn open(state_dir: &Path, policy: &SessionPolicy) -> Result<Self, SessionError> {
        super::recover::open(state_dir, policy)
    }

    /// A new session with its own workspace and host uid.
    pub fn create(&self, tenant: Option<String>) -> Result<SessionInfo, SessionError> {
        if let Some(t) = &tenant {
            super::session::check_tenant(t)?;
        }
        let sh = &self.shared;
        let (policy, uid) = {
            let mut inner = lock(&sh.inner);
            let max = inner.policy.max_sessions;
            if inner.live.len() + inner.creating >= max {
                return Err(SessionError::TooMany(max));
            }
            let (base, count) = (inner.policy.uid_base, inner.policy.uid_count);
            let uid = inner
                .uids
                .allocate(base, count)
                .ok_or(SessionError::NoUid(UidPool::capacity(count)))?;
            inner.creating += 1;
            (inner.policy.clone(), uid)
        };
        let started = Instant::now();
        let result = super::session::build(&sh.dir, uid, &policy, tenant).map(|s| {
            let info = s.info();
            (s, info)
        });
        let mut inner = lock(&sh.inner);
        inner.creating -= 1;
        match result {
            Ok((session, info)) => {
                tracing::info!(session = %session.id, uid, ms = started.elapsed().as_millis() as u64, "session created");
                inner.live.insert(session.id.clone(), Arc::new(session));
                Ok(info)
            }
            Err((None, e)) => {
                inner.uids.release(uid);
                Err(e)
            }
            Err((Some(id), e)) => {
                drop(inner);
                tracing::error!(session = %id, error = %e, "creating a session failed");
                let cleaned = layout::teardown(&sh.dir, &id);
                let mut inner = lock(&sh.inner);
                match cleaned {
                    Ok(()) => inner.uids.release(uid),
                    Err(c) => tracing::error!(session = %id, uid, error = %c,
                        "could not remove a failed session; its uid stays out of use"),
                }
                Err(e)
            }
        }
    }

    /// The live session `id`. Counts as use (see `touch`), and mounts a
    /// quota image again if it was unmounted behind our back, so a run never
    /// writes into the bare directory.
    pub fn get(&self, id: &str) -> Result<Arc<Session>, SessionError> {
        let s = self.lookup(id)?;
        if s.disk_quota > 0 {
            // Under the state lock, which a close holds while removing files.
            let _st = lock(&s.state);
            if s.is_closed() {
                return Err(SessionError::NotFound(s.id.clone()));
            }
            match layout::ensure_mounted(&self.shared.dir, &s.id) {
                Ok(true) => {
                    tracing::warn!(session = %s.id, "workspace image was not mounted; mounted it again")
                }
                Ok(false) => {}
                Err(e) => return Err(SessionError::Workspace(e)),
            }
        }
        self.touch_session(&s);
        Ok(s)
    }

    pub fn info(&self, id: &str) -> Result<SessionInfo, SessionError> {
        Ok(self.lookup(id)?.info())
    }

    /// Ends a session: unmounts and deletes its image, workspace and
    /// metadata, then frees its uid. The session is gone for callers at
    /// once; if a run holds its `run_lock`, the files are removed by a
    /// helper thread as soon as the run releases it (the uid is freed only
    /// then). A failed removal is retried by `sweep` and on the next start.
    pub fn close(&self, id: &str) -> Result<(), SessionError> {
        let id = check_id(id)?;
        let s = {
            let mut inner = lock(&self.shared.inner);
            let s = inner
                .live
                .remove(id)
                .ok_or_else(|| SessionError::NotFound(id.to_string()))?;
            inner.closing.insert(id.to_string(), s.clone());
            s
        };
        self.shared.begin_close(&s);
        let attempt = match s.run_lock.try_lock() {
            Ok(guard) => Some(self.shared.finish_close(&s, guard)),
            Err(_) => None,
        };
        match attempt {
            Some(result) => result,
            None => {
                tracing::info!(session = %s.id, "closing after the current run ends");
                let (shared, s) = (self.shared.clone(), s.clone());
                std::thread::spawn(move || {
                    let guard = s.run_lock.blocking_lock();
                    let _ = shared.finish_close(&s, guard);
                });
                Ok(())
            }
        }
    }

    /// Marks the session used now. The metadata is written atomically, at
    /// most every 5 seconds per session. Unknown ids are ignored.
    pub fn touch(&self, id: &str) {
        if let Ok(s) = self.lookup(id) {
            self.touch_session(&s);
        }
    }

    /// Records that a run starts, on disk, before it does: a crash during
    /// the run then shows as `last_run_lost` after the restart.
    pub fn run_started(&self, id: &str) -> Result<(), SessionError> {
        let s = self.lookup(id)?;
        s.update(&self.shared.dir, meta::Durability::Atomic, |m| {
            m.run_in_flight = true;
            m.last_run_lost = false;
        })
    }

    pub fn run_finished(&self, id: &str) {
        let Ok(id) = check_id(id) else { return };
        let s = {
            let inner = lock(&self.shared.inner);
            inner
                .live
                .get(id)
                .or_else(|| inner.closing.get(id))
                .cloned()
        };
        if let Some(s) = s {
            if let Err(e) = s.update(&self.shared.dir, meta::Durability::Atomic, |m| {
                m.run_in_flight = false
            }) {
                tracing::warn!(session = %id, error = %e, "could not record the end of a run");
            }
        }
    }

    /// Closes every session idle for longer than `idle_ttl` at `now`, except
    /// those whose `run_lock` is held, and retries unfinished closes.
    /// Returns the ids it closed.
    pub fn sweep(&self, now: SystemTime) -> Vec<String> {
        super::recover::sweep(&self.shared, now)
    }

    /// Live sessions.
    pub fn len(&self) -> usize {
        lock(&self.shared.inner).live.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes a reloaded policy: TTL and limits apply at once; quota size
    /// and mode apply to sessions created from now on.
    pub fn update_policy(&self, policy: &SessionPolicy) {
        lock(&self.shared.inner).policy = policy.clone();
    }

    fn lookup(&self, id: &str) -> Result<Arc<Session>, SessionError> {
        let id = check_id(id)?;
        lock(&self.shared.inner)
            .live
            .get(id)
            .cloned()
            .ok_or_else(|| SessionError::NotFound(id.to_string()))
    }

    fn touch_session(&self, s: &Session) {
        let mut st = lock(&s.state);
        st.last_used = SystemTime::now();
        st.meta.last_used = unix_secs(st.last_used);
        if st.persisted.elapsed() >= PERSIST_EVERY {
            st.persisted = Instant::now();
            if let Err(e) = meta::write(&self.shared.dir, &st.meta, meta::Durability::Atomic) {
                tracing::warn!(session = %s.id, error = %e, "could not record last use");
            }
        }
    }
}

impl Shared {
    /// Marks a session being closed, on disk first, so a crash part-way
    /// through its removal is finished on the next start.
    pub(super) fn begin_close(&self, s: &Session) {
        s.closed.store(true, Ordering::Release);
        if let Err(e) = s.update(&self.dir, meta::Durability::Durable, |m| m.closing = true) {
            tracing::warn!(session = %s.id, error = %e, "could not mark a session closing");
        }
    }

    /// Removes a closing session's files while holding its run lock, then
    /// frees its uid. Does nothing if another caller finished it already.
    pub(super) fn finish_close(
        &self,
        s: &Session,
        _guard: tokio::sync::MutexGuard<'_, ()>,
    ) -> Result<(), SessionError> {
        if !lock(&self.inner).closing.contains_key(&s.id) {
            return Ok(());
        }
        // Keeps `get` from mounting the image again while it goes away.
        let st = lock(&s.state);
        let removed = layout::teardown(&self.dir, &s.id);
        drop(st);
        match removed {
            Ok(()) => {
                let mut inner = lock(&self.inner);
                inner.closing.remove(&s.id);
                inner.uids.release(s.host_uid);
                tracing::info!(session = %s.id, "session closed");
                Ok(())
            }
            Err(e) => {
                tracing::error!(session = %s.id, error = %e, "removing a closed session failed; will retry");
                Err(SessionError::Workspace(e))
            }
        }
    }
}
