//! Content-addressed Python environments built by uv in install jails.
//!
//! [`Envs::ensure`] maps a requirement list to a read-only venv under
//! `state_dir/envs/<key>/`: a cache hit is an index lookup, a miss builds
//! the environment once (concurrent callers for one key share the build) and
//! then collects least-recently-used environments above the size cap.
//!
//! A build runs on a volume of its own (`staging`), with the package index
//! as its only reachable host (`proxy`), and sees uv's shared package cache
//! only through an overlay (`pkgcache`); see `install` for the two jails.

pub(crate) mod bare_venv;
mod build;
mod build_job;
mod cache;
mod config;
mod error;
mod flight;
mod gc;
mod install;
mod key;
mod lease;
mod output;
mod pkgcache;
mod proxy;
mod requirements;
mod session_install;
mod staging;
mod state;
mod uv;

pub use config::EnvConfig;
pub use error::EnvError;
pub use lease::EnvLease;
pub(crate) use requirements::validate_requirements;
pub use session_install::{Added, Conflict, SessionTarget, SESSION_SITE};

use cache::Index;
use key::Settings;
use state::Core;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// Builds that may run at once; more wait for a slot.
pub const MAX_CONCURRENT_BUILDS: usize = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnvStats {
    /// Environments in the cache.
    pub envs: u64,
    /// Builds this instance has run (successful or not).
    pub builds: u64,
    /// Disk used by the cached environments.
    pub bytes: u64,
}

/// The environment cache. `Send + Sync`; share it through an `Arc`.
pub struct Envs {
    core: Arc<Core>,
}

impl Envs {
    /// Open the cache under `cfg.state_dir`: remove what an interrupted
    /// build or delete left, and index the environments already built.
    pub fn new(cfg: EnvConfig, policy: &prims_policy::Policy) -> Result<Self, EnvError> {
        if cfg.build_uid == 0 {
            return Err(EnvError::Policy {
                message: "the build uid must not be 0".into(),
            });
        }
        if !cfg.interpreter.is_absolute() {
            return Err(EnvError::Policy {
                message: format!(
                    "interpreter {} is not an absolute path",
                    cfg.interpreter.display()
                ),
            });
        }
        let settings = Settings::from_policy(policy, &cfg.interpreter)?;
        let envs_dir = cfg.state_dir.join("envs");
        std::fs::create_dir_all(&envs_dir).map_err(EnvError::io("creating", &envs_dir))?;
        if let Ok(rd) = std::fs::read_dir(&cfg.state_dir) {
            for ent in rd.flatten() {
                if ent.file_name().to_string_lossy().starts_with(".tools-") {
                    cache::remove_any(&ent.path());
                }
            }
        }
        let index = Index::load(&envs_dir)?;
        staging::clean_leftovers(&cfg.state_dir);
        let pkgcache = Arc::new(pkgcache::PkgCache::open(&cfg.state_dir, cfg.build_uid)?);
        tracing::info!(envs = index.entries.len(), bytes = index.bytes(), dir = %envs_dir.display(), "environment cache opened");
        Ok(Envs {
            core: Arc::new(Core {
                cfg,
                envs_dir,
                settings: RwLock::new(Arc::new(settings)),
                index: Arc::new(Mutex::new(index)),
                inflight: Mutex::new(HashMap::new()),
                slots: tokio::sync::Semaphore::new(MAX_CONCURRENT_BUILDS),
                uv: uv::UvTool::default(),
                pkgcache,
                builds: AtomicU64::new(0),
                base_wanted: AtomicBool::new(false),
            }),
        })
    }

    /// The environment for `requirements` (plus the policy's default
    /// packages), built if needed. With no requirements: the base
    /// environment. `progress` sees build messages, a few per second.
    pub async fn ensure(
        &self,
        requirements: &[String],
        progress: &(dyn Fn(String) + Send + Sync),
    ) -> Result<EnvLease, EnvError> {
        let reqs = validate_requirements(requirements)?;
        self.core.ensure(reqs, progress).await
    }

    /// Start building the base environment, and the IPython layer, in the
    /// background.
    pub fn spawn_base_build(self: &Arc<Self>) {
        self.core.base_wanted.store(true, Ordering::Relaxed);
        Core::spawn_base_build(&self.core);
        Core::spawn_ipython_build(&self.core);
    }

    /// The IPython layer (packages every interpreter sees after its own:
    /// IPython, matplotlib), built if needed; `None` when the policy asks
    /// for no layer to be built (none at all, or an admin's directory).
    pub async fn ensure_ipython(
        &self,
        progress: &(dyn Fn(String) + Send + Sync),
    ) -> Result<Option<EnvLease>, EnvError> {
        self.core.ensure_ipython(progress).await
    }

    /// The site-packages directory of the environment `lease` holds.
    pub fn site_packages(&self, lease: &EnvLease) -> std::path::PathBuf {
        lease
            .dir
            .join(format!("lib/python{}/site-packages", self.core.cfg.version))
    }

    /// Installs what `requirements` (validated) add to the session `to`,
    /// streaming uv's lines to `progress`. Blocks until the jail has ended:
    /// call it from a blocking thread inside the daemon's runtime. Once
    /// `cancel` is cancelled (from another thread) the install is stopped,
    /// its jail killed, and this returns [`EnvError::Cancelled`]; the
    /// session's site directory then holds whole distributions only.
    pub fn install_into_session(
        &self,
        to: SessionTarget<'_>,
        requirements: &[String],
        progress: &(dyn Fn(String) + Sync),
        cancel: &crate::job::Cancel,
    ) -> Result<Added, EnvError> {
        self.core
            .install_into_session(to, requirements, progress, cancel)
    }

    /// The base environment of the current policy is built.
    pub fn base_ready(&self) -> bool {
        let key = self.core.base_key();
        self.core.lock_index().entries.contains_key(&key)
    }

    pub fn stats(&self) -> EnvStats {
        let index = self.core.lock_index();
        EnvStats {
            envs: index.entries.len() as u64,
            builds: self.core.builds.load(Ordering::Relaxed),
            bytes: index.bytes(),
        }
    }

    /// Delete least-recently-used environments until the cache fits
    /// `python.env_cache_bytes`; returns the deleted keys. Leased
    /// environments and the base environment are kept.
    pub fn gc(&self) -> Result<Vec<String>, EnvError> {
        Ok(self.core.gc(&[]))
    }

    /// Apply a new policy. Later `ensure` calls use its packages and index
    /// settings (which give new keys); an unusable `python` section is
    /// logged and the previous settings stay.
    pub fn update_policy(&self, policy: &prims_policy::Policy) {
        let new = match Settings::from_policy(policy, &self.core.cfg.interpreter) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "keeping the previous environment settings");
                return;
            }
        };
        let old_base = self.core.base_key();
        *self
            .core
            .settings
            .write()
            .unwrap_or_else(|p| p.into_inner()) = Arc::new(new);
        let removed = self.core.gc(&[]);
        if !removed.is_empty() {
            tracing::info!(?removed, "environments collected after a policy change");
        }
        if old_base != self.core.base_key() && self.core.base_wanted.load(Ordering::Relaxed) {
            Core::spawn_base_build(&self.core);
        }
        if self.core.base_wanted.load(Ordering::Relaxed) {
            // A no-op lookup when the layer is already built.
            Core::spawn_ipython_build(&self.core);
        }
    }
}
