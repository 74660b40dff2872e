//! The cache's shared state, which `Envs`, its builds and its collection
//! work on: the index, the builds in flight, the build slots, and the
//! settings of the policy in force.

use super::cache::Index;
use super::config::EnvConfig;
use super::error::EnvError;
use super::gc;
use super::key::{env_key, Settings};
use super::lease::EnvLease;
use super::pkgcache::PkgCache;
use super::uv::UvTool;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, RwLock};
use tokio::sync::{broadcast, watch};

pub(super) struct Core {
    pub(super) cfg: EnvConfig,
    pub(super) envs_dir: PathBuf,
    pub(super) settings: RwLock<Arc<Settings>>,
    pub(super) index: Arc<Mutex<Index>>,
    pub(super) inflight: Mutex<HashMap<String, Flight>>,
    pub(super) slots: tokio::sync::Semaphore,
    pub(super) uv: UvTool,
    pub(super) pkgcache: Arc<PkgCache>,
    pub(super) builds: AtomicU64,
    /// `spawn_base_build` was called: rebuild the base after a policy change.
    pub(super) base_wanted: AtomicBool,
}

pub(super) type Done = Option<Result<(), EnvError>>;

/// A build in progress.
pub(super) struct Flight {
    pub(super) progress: broadcast::Sender<String>,
    pub(super) done: watch::Receiver<Done>,
}

impl Core {
    pub(super) fn lock_index(&self) -> std::sync::MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn settings(&self) -> Arc<Settings> {
        self.settings
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub(super) fn key_for(&self, settings: &Settings, reqs: &[String]) -> (String, Vec<String>) {
        let packages = settings.packages(reqs);
        let key = env_key(
            &self.cfg.interpreter,
            &self.cfg.version,
            &packages,
            settings,
        );
        (key, packages)
    }

    pub(super) fn base_key(&self) -> String {
        self.key_for(&self.settings(), &[]).0
    }

    /// The IPython layer's key and packages (no default packages), if the
    /// policy asks for a layer to be built.
    pub(super) fn ipython_key_for(&self, settings: &Settings) -> Option<(String, Vec<String>)> {
        if settings.ipython_packages.is_empty() {
            return None;
        }
        let packages = settings.ipython_packages.clone();
        let key = env_key(
            &self.cfg.interpreter,
            &self.cfg.version,
            &packages,
            settings,
        );
        Some((key, packages))
    }

    /// A lease on `key` if it is cached; records the use.
    pub(super) fn try_lease(&self, key: &str, built: bool) -> Option<EnvLease> {
        let mut index = self.lock_index();
        let entry = index.entries.get_mut(key)?;
        entry.leases += 1;
        index.touch(&self.envs_dir, key);
        Some(EnvLease {
            dir: self.envs_dir.join(key),
            key: key.to_string(),
            built,
            index: self.index.clone(),
        })
    }

    /// Builds the IPython layer in the background, if the policy asks for one.
    pub(super) fn spawn_ipython_build(core: &Arc<Core>) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let core = core.clone();
        rt.spawn(async move {
            let progress = |m: String| tracing::debug!(message = %m, "IPython layer");
            match core.ensure_ipython(&progress).await {
                Ok(Some(lease)) => {
                    tracing::info!(key = %lease.key, built = lease.built, "IPython layer ready")
                }
                Ok(None) => {}
                Err(e) => tracing::error!(error = %e, "building the IPython layer failed; cells run without notebook semantics until it is built"),
            }
        });
    }

    pub(super) fn spawn_base_build(core: &Arc<Core>) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            tracing::error!(
                "no tokio runtime: the base environment is not built in the background"
            );
            return;
        };
        let core = core.clone();
        rt.spawn(async move {
            let progress = |m: String| tracing::debug!(message = %m, "base environment");
            match core.ensure(Vec::new(), &progress).await {
                Ok(lease) => {
                    tracing::info!(key = %lease.key, built = lease.built, "base environment ready")
                }
                Err(e) => tracing::error!(error = %e, "building the base environment failed"),
            }
        });
    }

    /// Collect above the cap, keeping the base environment, the kernel
    /// layer and `keep`.
    pub(super) fn gc(&self, keep: &[&str]) -> Vec<String> {
        let base = self.base_key();
        let ipython = self.ipython_key_for(&self.settings()).map(|(k, _)| k);
        let mut keep: Vec<&str> = keep.to_vec();
        keep.push(&base);
        keep.extend(ipython.as_deref());
        let cap = self.settings().cache_bytes;
        let (keys, trash) = {
            let mut index = self.lock_index();
            let keys = gc::plan(&index, cap, &keep);
            let trash = gc::detach(&mut index, &self.envs_dir, &keys);
            (keys, trash)
        };
        gc::delete(&trash);
        if !keys.is_empty() {
            tracing::info!(removed = ?keys, cap, "environments collected");
        }
        keys
    }
}
