//! The store's state, shared by the store, start-up recovery and the idle
//! sweep: the sessions directory, the naming key and the live sessions.

use super::error::SessionError;
use super::key::SessionKey;
use super::layout;
use super::meta;
use super::policy::SessionPolicy;
use super::session::{lock, Session};
use super::uids::UidPool;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

#[derive(Debug)]
pub(super) struct Shared {
    /// `state_dir/sessions`.
    pub dir: PathBuf,
    pub key: SessionKey,
    pub inner: Mutex<Inner>,
}

#[derive(Debug)]
pub(super) struct Inner {
    pub policy: SessionPolicy,
    /// By name.
    pub live: HashMap<String, Arc<Session>>,
    /// Closed, but their files are not all gone yet (a run still held the
    /// lock, or removal failed): their uids stay taken.
    pub closing: HashMap<String, Arc<Session>>,
    pub creating: usize,
    /// Spares made for the warm pool and not yet adopted or discarded.
    pub spares: usize,
    pub uids: UidPool,
}

impl Shared {
    /// Marks a session being closed, on disk first, so a crash part-way
    /// through its removal is finished on the next start.
    pub(super) fn begin_close(&self, s: &Session) {
        s.closed.store(true, Ordering::Release);
        if let Err(e) = s.update(&self.dir, meta::Durability::Durable, |m| m.closing = true) {
            tracing::warn!(session = %s.name, error = %e, "could not mark a session closing");
        }
    }

    /// Removes a closing session's files while holding its run lock, then
    /// frees its uid. Does nothing if another caller finished it already.
    pub(super) fn finish_close(
        &self,
        s: &Session,
        _guard: tokio::sync::MutexGuard<'_, ()>,
    ) -> Result<(), SessionError> {
        if !lock(&self.inner).closing.contains_key(&s.name) {
            return Ok(());
        }
        // Keeps `get` from mounting the image again while it goes away.
        let st = lock(&s.state);
        let removed = layout::teardown(&self.dir, &s.name);
        drop(st);
        match removed {
            Ok(()) => {
                let mut inner = lock(&self.inner);
                inner.closing.remove(&s.name);
                inner.uids.release(s.host_uid);
                tracing::info!(session = %s.name, "session closed");
                Ok(())
            }
            Err(e) => {
                tracing::error!(session = %s.name, error = %e, "removing a closed session failed; will retry");
                Err(SessionError::Workspace(e))
            }
        }
    }
}
