//! Single-flight builds: the first `ensure` for a missing key starts a build
//! task; every concurrent `ensure` for that key waits on the same task and
//! sees its progress. The task is spawned, so a caller that goes away does
//! not abandon a half-done build.

use super::build;
use super::build_job::BuildJob;
use super::cache::Entry;
use super::error::EnvError;
use super::lease::EnvLease;
use super::state::{Core, Done, Flight};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{broadcast, watch};

/// How often `ensure` retries when the environment vanished between its
/// build and the lease (only possible with a cache cap below its size).
const MAX_ATTEMPTS: usize = 3;

impl Core {
    pub(super) async fn ensure(
        self: &Arc<Self>,
        reqs: Vec<String>,
        progress: &(dyn Fn(String) + Send + Sync),
    ) -> Result<EnvLease, EnvError> {
        let settings = self.settings();
        let (key, packages) = self.key_for(&settings, &reqs);
        self.ensure_key(settings, key, packages, reqs, progress)
            .await
    }

    /// The IPython layer, built if needed; `None` when the policy asks for
    /// no layer to be built.
    pub(super) async fn ensure_ipython(
        self: &Arc<Self>,
        progress: &(dyn Fn(String) + Send + Sync),
    ) -> Result<Option<EnvLease>, EnvError> {
        let settings = self.settings();
        let Some((key, packages)) = self.ipython_key_for(&settings) else {
            return Ok(None);
        };
        let reqs = packages.clone();
        self.ensure_key(settings, key, packages, reqs, progress)
            .await
            .map(Some)
    }

    async fn ensure_key(
        self: &Arc<Self>,
        settings: std::sync::Arc<super::key::Settings>,
        key: String,
        packages: Vec<String>,
        reqs: Vec<String>,
        progress: &(dyn Fn(String) + Send + Sync),
    ) -> Result<EnvLease, EnvError> {
        for _ in 0..MAX_ATTEMPTS {
            if let Some(lease) = self.try_lease(&key, false) {
                return Ok(lease);
            }
            let (mut prog_rx, mut done_rx, leader) = {
                let mut inflight = self.inflight.lock().unwrap_or_else(|p| p.into_inner());
                // A build may have finished since the lookup above; it enters
                // the index before it leaves `inflight`.
                if let Some(lease) = self.try_lease(&key, false) {
                    return Ok(lease);
                }
                match inflight.get(&key) {
                    Some(f) => (f.progress.subscribe(), f.done.clone(), false),
                    None => {
                        let (ptx, prx) = broadcast::channel(64);
                        let (dtx, drx) = watch::channel(None);
                        inflight.insert(
                            key.clone(),
                            Flight {
                                progress: ptx.clone(),
                                done: drx.clone(),
                            },
                        );
                        let job = BuildJob {
                            state_dir: self.cfg.state_dir.clone(),
                            envs_dir: self.envs_dir.clone(),
                            jails: self.cfg.jails.clone(),
                            interpreter: self.cfg.interpreter.clone(),
                            version: self.cfg.version.clone(),
                            build_uid: self.cfg.build_uid,
                            uv: Default::default(),
                            key: key.clone(),
                            requirements: reqs.clone(),
                            packages: packages.clone(),
                            settings: settings.clone(),
                            pkgcache: self.pkgcache.clone(),
                            audit: self.cfg.audit.clone(),
                            egress: self.cfg.egress.clone(),
                        };
                        tokio::spawn(self.clone().fly(job, ptx, dtx));
                        (prx, drx, true)
                    }
                }
            };
            if !leader {
                progress("waiting for the same environment, already being built".into());
            }
            let result = wait(&mut prog_rx, &mut done_rx, progress).await;
            result?;
            if let Some(lease) = self.try_lease(&key, leader) {
                return Ok(lease);
            }
        }
        Err(EnvError::Policy {
            message: "the environment was collected right after it was built: \
                      python.env_cache_bytes is smaller than one environment"
                .into(),
        })
    }

    /// The build task: wait for a slot, find uv, build, index, collect.
    async fn fly(
        self: Arc<Self>,
        job: BuildJob,
        ptx: broadcast::Sender<String>,
        dtx: watch::Sender<Done>,
    ) {
        let landing = Landing {
            core: &self,
            key: job.key.clone(),
        };
        let send = {
            let ptx = ptx.clone();
            move |m: String| {
                let _ = ptx.send(m);
            }
        };
        let result = self.build_one(job, &send).await;
        if let Err(e) = &result {
            tracing::warn!(key = %landing.key, error = %e, "environment build failed");
        }
        // Leave `inflight` before waking the waiters: they look again.
        drop(landing);
        dtx.send_replace(Some(result));
    }

    async fn build_one(
        self: &Arc<Self>,
        mut job: BuildJob,
        send: &(dyn Fn(String) + Send + Sync),
    ) -> Result<(), EnvError> {
        let permit = match self.slots.try_acquire() {
            Ok(p) => p,
            Err(_) => {
                send("waiting for another environment build to finish".into());
                self.slots.acquire().await.map_err(|_| EnvError::Jail {
                    message: "the build queue is closed".into(),
                })?
            }
        };
        if !job.packages.is_empty() {
            job.uv = self
                .uv
                .get(
                    &self.cfg.state_dir,
                    &self.cfg.interpreter,
                    &job.settings,
                    send,
                    // A build is shared by every caller that waits for it:
                    // no one caller's end may stop it.
                    &crate::job::Cancel::default(),
                )
                .await?;
        }
        self.builds.fetch_add(1, Ordering::Relaxed);
        let (ptx, mut prx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let handle = tokio::task::spawn_blocking(move || {
            let progress = move |m: String| {
                let _ = ptx.send(m);
            };
            build::run(&job, &progress)
        });
        // Forward the blocking build's progress until it ends.
        while let Some(m) = prx.recv().await {
            send(m);
        }
        let meta = handle.await.map_err(|e| EnvError::Jail {
            message: format!("the build task failed: {e}"),
        })??;
        drop(permit);
        let key = meta.key.clone();
        self.lock_index().entries.insert(
            key.clone(),
            Entry {
                meta,
                leases: 0,
                written: Instant::now(),
            },
        );
        let core = self.clone();
        let gc = tokio::task::spawn_blocking(move || core.gc(&[&key]));
        if let Err(e) = gc.await {
            tracing::warn!(error = %e, "collecting environments failed");
        }
        Ok(())
    }
}

/// Takes a flight out of `inflight` when its task ends, even by a panic
/// (the waiters then see the result sender gone).
struct Landing<'a> {
    core: &'a Core,
    key: String,
}

impl Drop for Landing<'_> {
    fn drop(&mut self) {
        self.core
            .inflight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.key);
    }
}

/// Forward progress until the build is done; its result.
async fn wait(
    prog_rx: &mut broadcast::Receiver<String>,
    done_rx: &mut watch::Receiver<Done>,
    progress: &(dyn Fn(String) + Send + Sync),
) -> Result<(), EnvError> {
    let mut open = true;
    loop {
        tokio::select! {
            biased;
            msg = prog_rx.recv(), if open => match msg {
                Ok(m) => progress(m),
                Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => open = false,
            },
            done = done_rx.wait_for(Option::is_some) => {
                return match done {
                    Ok(v) => v.clone().unwrap_or(Ok(())),
                    Err(_) => Err(EnvError::Jail {
                        message: "the build task ended without a result".into(),
                    }),
                };
            }
        }
    }
}
