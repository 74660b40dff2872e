//! One environment build: a staging venv, uv in an install jail (see
//! `install`), then an atomic rename into the cache.

use super::cache::{self, write_meta, Meta, BUILD_PREFIX};
use super::install::{chown, chown_tree, install_spec};
use super::key::Settings;
use super::output::Collector;
use super::EnvError;
use crate::cgroups::Parents;
use crate::runner::{run_job, Cancel};
use prims_protocol::Status;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub use super::output::tail;

/// The jailer enforces the build timeout; this watchdog is a backstop.
const WATCHDOG_GRACE: Duration = Duration::from_secs(30);

/// 16 random hex digits for temporary names.
pub fn rand_hex() -> String {
    let mut b = [0u8; 8];
    if getrandom::fill(&mut b).is_err() {
        let n = cache::now_ms() ^ u64::from(std::process::id());
        b = n.to_le_bytes();
    }
    hex::encode(b)
}

/// Everything one build needs, owned so it can move to a blocking thread.
pub struct BuildJob {
    pub state_dir: PathBuf,
    pub envs_dir: PathBuf,
    pub jailer: PathBuf,
    pub cgroup: Parents,
    pub interpreter: PathBuf,
    pub version: String,
    pub build_uid: u32,
    pub uv: PathBuf,
    pub key: String,
    pub requirements: Vec<String>,
    pub packages: Vec<String>,
    pub settings: std::sync::Arc<Settings>,
}

/// Build the environment and rename it into `envs_dir/<key>`. On failure
/// nothing is left behind.
pub fn run(job: &BuildJob, progress: &(dyn Fn(String) + Sync)) -> Result<Meta, EnvError> {
    let staging = job
        .envs_dir
        .join(format!("{BUILD_PREFIX}{}-{}", job.key, rand_hex()));
    let result = build_in(job, &staging, progress);
    cache::remove_any(&staging);
    result
}

fn build_in(
    job: &BuildJob,
    staging: &Path,
    progress: &(dyn Fn(String) + Sync),
) -> Result<Meta, EnvError> {
    let start = Instant::now();
    let venv = staging.join("venv");
    let work = staging.join("work");
    std::fs::create_dir(staging).map_err(EnvError::io("creating", staging))?;
    crate::venv::create(&job.interpreter, &job.version, &venv).map_err(|e| EnvError::Jail {
        message: format!("creating the staging venv: {e}"),
    })?;
    std::fs::create_dir(&work).map_err(EnvError::io("creating", &work))?;
    if job.packages.is_empty() {
        // Nothing to install: the empty venv is the environment.
        progress("creating an empty Python environment".into());
    } else {
        run_uv(job, staging, &venv, &work, progress)?;
    }
    let site = venv.join(format!("lib/python{}/site-packages", job.version));
    if !site.is_dir() {
        return Err(EnvError::Build {
            message: format!("uv succeeded but {} is missing", site.display()),
        });
    }
    let size_bytes = cache::freeze(&venv)?;
    let now = cache::now_ms();
    let build_ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
    let meta = Meta {
        key: job.key.clone(),
        requirements: job.requirements.clone(),
        packages: job.packages.clone(),
        interpreter: job.interpreter.clone(),
        version: job.version.clone(),
        size_bytes,
        created_ms: now,
        last_used_ms: now,
        build_ms,
    };
    write_meta(&job.envs_dir, &meta)?;
    let dest = job.envs_dir.join(&job.key);
    if let Err(e) = std::fs::rename(&venv, &dest) {
        cache::remove_any(&cache::meta_path(&job.envs_dir, &job.key));
        return Err(EnvError::io("renaming into place", &dest)(e));
    }
    tracing::info!(key = %job.key, size_bytes, build_ms, "environment built");
    Ok(meta)
}

/// uv in an install jail, installing `job.packages` into the staging venv.
fn run_uv(
    job: &BuildJob,
    staging: &Path,
    venv: &Path,
    work: &Path,
    progress: &(dyn Fn(String) + Sync),
) -> Result<(), EnvError> {
    let cache_dir = job.state_dir.join("uv-cache");
    std::fs::create_dir_all(&cache_dir).map_err(EnvError::io("creating", &cache_dir))?;
    // The jail writes as the build uid: it must own what it writes.
    for dir in [staging, work, &cache_dir] {
        chown(dir, job.build_uid)?;
    }
    chown_tree(venv, job.build_uid)?;

    let short = job.key.get(..16).unwrap_or(&job.key);
    let cgroup_job = format!("envbuild-{short}-{}", rand_hex());
    let spec = install_spec(job, venv, work, &cache_dir, &cgroup_job);
    progress(format!(
        "building a Python environment: {}",
        job.packages.join(" ")
    ));
    tracing::info!(key = %job.key, packages = ?job.packages, "building environment");
    let collector = Collector::new(progress);
    let sink = |s, b: &[u8]| collector.feed(s, b);
    let cancel = Cancel::default();
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let watchdog_cancel = cancel.clone();
    let limit = job.settings.build_timeout + WATCHDOG_GRACE;
    let watchdog = std::thread::spawn(move || {
        if let Err(mpsc::RecvTimeoutError::Timeout) = stop_rx.recv_timeout(limit) {
            watchdog_cancel.cancel();
        }
    });
    let res = run_job(&job.jailer, &spec, &sink, &cancel);
    drop(stop_tx);
    let _ = watchdog.join();
    if job.cgroup.backend != prims_protocol::CgroupBackend::None {
        // The jailer removes its cgroup; this only matters if it crashed.
        let _ = crate::cgroups::remove_job(&job.cgroup, &cgroup_job);
    }
    let res = res.map_err(|e| EnvError::Jail {
        message: format!("running the install jail: {e}"),
    })?;
    let uv_said = collector.finish();
    let o = &res.outcome;
    match o.status {
        Status::Ok => Ok(()),
        _ if res.cancelled => Err(EnvError::Timeout {
            after: job.settings.build_timeout,
        }),
        Status::Timeout => Err(EnvError::Timeout {
            after: job.settings.build_timeout,
        }),
        Status::Oom => Err(EnvError::OutOfMemory {
            limit_bytes: job.settings.build_memory,
        }),
        Status::SetupError => {
            let why = o.setup_error.as_ref().map(ToString::to_string);
            Err(EnvError::Jail {
                message: why.unwrap_or_else(|| "the jail could not be set up".into()),
            })
        }
        Status::Exit | Status::Signal => {
            let how = match (o.exit_code, o.signal) {
                (_, Some(sig)) => format!("uv was killed by signal {sig}"),
                (Some(code), _) => format!("uv exited with code {code}"),
                _ => "uv failed".to_string(),
            };
            let message = if uv_said.is_empty() { how } else { uv_said };
            Err(EnvError::Build { message })
        }
    }
}
