//! A lease on a cached environment, which keeps it from being collected.

use super::cache::Index;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// A cached environment in use. While any lease on it lives, it is never
/// collected. Dropping the lease releases it.
pub struct EnvLease {
    /// The venv on the host; run jails mount it read-only at `/venv`.
    pub dir: PathBuf,
    pub key: String,
    /// This call built the environment (it was not cached, and no other
    /// call was already building it).
    pub built: bool,
    pub(super) index: Arc<Mutex<Index>>,
}

impl std::fmt::Debug for EnvLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnvLease")
            .field("dir", &self.dir)
            .field("key", &self.key)
            .field("built", &self.built)
            .finish()
    }
}

impl Drop for EnvLease {
    fn drop(&mut self) {
        let mut index = self.index.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = index.entries.get_mut(&self.key) {
            e.leases = e.leases.saturating_sub(1);
        }
    }
}

impl EnvLease {
    /// A second lease on the same environment, released on its own.
    pub fn share(&self) -> EnvLease {
        let mut index = self.index.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = index.entries.get_mut(&self.key) {
            e.leases += 1;
        }
        EnvLease {
            dir: self.dir.clone(),
            key: self.key.clone(),
            built: false,
            index: self.index.clone(),
        }
    }
}
