//! One environment build: a volume of its own (`staging`), uv in an install
//! jail whose only way out is the proxy, bytecode compiled in a second jail
//! with no network, then the venv frozen into a read-only image of its own
//! (`envs/<key>.img`, mounted on `envs/<key>/`), renamed into the cache
//! atomically; then, if no package code could have run, what uv added to
//! the package cache is kept (`pkgcache`).
//!
//! An image rather than a directory: a jail's `/proc/self/mountinfo` shows
//! each bind's path inside its filesystem, and inside the image the venv is
//! `/`, not a path under the host's state directory.

use super::build_job::BuildJob;
use super::cache::{self, rand_hex, write_meta, Meta, BUILD_PREFIX};
use super::error::EnvError;
use super::install::{compile_groups, compile_spec, uv_spec};
use super::output::Collector;
use super::proxy;
use super::staging::{self, BuildVolume};
use crate::job::{Cancel, RunResult, Sink};
use prims_protocol::jail::{JobSpec, Status};
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub(super) use super::output::tail;

/// The jailer enforces the build timeout; this watchdog is a backstop.
const WATCHDOG_GRACE: Duration = Duration::from_secs(30);

/// Build the environment and rename it into `envs_dir/<key>`. On failure
/// nothing is left behind.
pub(super) fn run(job: &BuildJob, progress: &(dyn Fn(String) + Sync)) -> Result<Meta, EnvError> {
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
    std::fs::create_dir(staging).map_err(EnvError::io("creating", staging))?;
    let (venv, vol) = if job.packages.is_empty() {
        // Nothing to install: the empty venv is the environment.
        progress("creating an empty Python environment".into());
        let venv = staging.join("venv");
        make_venv(job, &venv)?;
        (venv, None)
    } else {
        let vol = install(job, progress)?;
        (vol.venv(), Some(vol))
    };
    let site = venv.join(format!("lib/python{}/site-packages", job.version));
    if !site.is_dir() {
        return Err(EnvError::Build {
            message: format!("uv succeeded but {} is missing", site.display()),
        });
    }
    let t = Instant::now();
    cache::freeze(&venv)?;
    let image = staging.join("env.img");
    let size_bytes = crate::volume::create_from_dir(&image, &venv)
        .map_err(EnvError::volume("the environment's image"))?;
    tracing::debug!(key = %job.key, image_ms = t.elapsed().as_millis() as u64, "environment image made");
    if let Some(vol) = vol {
        keep_downloads(job, vol);
    }
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
    if let Err(e) = cache::install_image(&job.envs_dir, &job.key, &image) {
        cache::remove_any(&cache::meta_path(&job.envs_dir, &job.key));
        return Err(e);
    }
    tracing::info!(key = %job.key, size_bytes, build_ms, "environment built");
    Ok(meta)
}

/// After a build that ran no package code, what uv added to the package
/// cache is kept for other builds; the volume goes afterwards. In the
/// background: keeping it waits for builds that have the cache in use.
fn keep_downloads(job: &BuildJob, vol: BuildVolume) {
    if !job.settings.only_binary {
        return;
    }
    let (cache, cap) = (job.pkgcache.clone(), job.settings.pkg_cache_bytes);
    std::thread::spawn(move || {
        if let Err(e) = cache.promote(&vol.cache_upper(), cap) {
            tracing::warn!(error = %e, "keeping a build's downloads in the package cache failed");
        }
        drop(vol);
    });
}

fn make_venv(job: &BuildJob, venv: &Path) -> Result<(), EnvError> {
    super::bare_venv::create(&job.interpreter, &job.version, venv).map_err(|e| EnvError::Jail {
        message: format!("creating the staging venv: {e}"),
    })
}

/// uv and compileall on a volume of the build's own, which holds the venv.
fn install(job: &BuildJob, progress: &(dyn Fn(String) + Sync)) -> Result<BuildVolume, EnvError> {
    let t = Instant::now();
    let mut vol = BuildVolume::create(&job.state_dir, job.settings.build_disk, job.build_uid)?;
    let volume_ms = t.elapsed().as_millis();
    make_venv(job, &vol.venv())?;
    staging::chown_tree(&vol.venv(), job.build_uid)?;
    progress(format!(
        "building a Python environment: {}",
        job.packages.join(" ")
    ));
    tracing::info!(key = %job.key, packages = ?job.packages, "building environment");
    let t = Instant::now();
    {
        let (lease, evicted) = job.pkgcache.checked_lease()?;
        for e in &evicted {
            if let Some(a) = &job.audit {
                a.cache_refetch(&e.entry, &e.why);
            }
        }
        vol.mount_cache(lease.dir)?;
        let ran = run_step(job, "uv", |cg| uv_spec(job, &vol, cg), progress, true, &[0]);
        vol.unmount_cache();
        drop(lease);
        ran?;
    }
    let uv_ms = t.elapsed().as_millis();
    let t = Instant::now();
    progress("compiling bytecode".into());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let site = vol
        .venv()
        .join(format!("lib/python{}/site-packages", job.version));
    let groups = compile_groups(&site, cores);
    // compileall exits 1 when a file does not compile (a test written for
    // another Python, say): that file just gets no .pyc.
    let results: Vec<Result<(), EnvError>> = std::thread::scope(|s| {
        let vol = &vol;
        let jails: Vec<_> = groups
            .iter()
            .map(|g| {
                s.spawn(move || {
                    run_step(
                        job,
                        "compile",
                        |cg| compile_spec(job, vol, cg, g),
                        progress,
                        false,
                        &[0, 1],
                    )
                })
            })
            .collect();
        jails
            .into_iter()
            .map(|j| {
                j.join().unwrap_or_else(|_| {
                    Err(EnvError::Jail {
                        message: "a compile thread panicked".into(),
                    })
                })
            })
            .collect()
    });
    results.into_iter().collect::<Result<(), EnvError>>()?;
    let compile_ms = t.elapsed().as_millis();
    tracing::info!(key = %job.key, volume_ms, uv_ms, compile_ms, "environment installed");
    Ok(vol)
}

/// Runs one install jail to completion; an error says why it failed.
fn run_step(
    job: &BuildJob,
    step: &str,
    spec: impl FnOnce(&str) -> JobSpec,
    progress: &(dyn Fn(String) + Sync),
    proxied: bool,
    ok_exits: &[i32],
) -> Result<(), EnvError> {
    let cgroup_job = job.jails.names.build(&job.key, step);
    let spec = spec(&cgroup_job);
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
    let res = if proxied {
        run_proxied(job, &spec, &sink, &cancel)
    } else {
        job.jails
            .run(&spec, &sink, &cancel, None)
            .map_err(|e| EnvError::Jail {
                message: format!("running the install jail: {e}"),
            })
    };
    drop(stop_tx);
    let _ = watchdog.join();
    judge(job, step, res?, collector.finish(), ok_exits)
}

/// The jail with the proxy serving its listener until the jail is gone.
fn run_proxied(
    job: &BuildJob,
    spec: &JobSpec,
    sink: Sink<'_>,
    cancel: &Cancel,
) -> Result<RunResult, EnvError> {
    let rt = tokio::runtime::Handle::try_current().map_err(|_| EnvError::Jail {
        message: "environment builds need the daemon's async runtime (for the proxy)".into(),
    })?;
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().map_err(|e| EnvError::Jail {
        message: format!("the proxy channel: {e}"),
    })?;
    let stop = tokio_util::sync::CancellationToken::new();
    let rules = proxy::index_rules(&job.settings);
    let served = rt.spawn(proxy::serve(
        job.egress.clone(),
        ours.into(),
        rules,
        stop.clone(),
    ));
    let res = job.jails.run(spec, sink, cancel, Some(theirs.into()));
    stop.cancel();
    // The proxy ends with its connections; the build waits for nothing more.
    drop(served);
    res.map_err(|e| EnvError::Jail {
        message: format!("running the install jail: {e}"),
    })
}

fn judge(
    job: &BuildJob,
    step: &str,
    res: RunResult,
    said: String,
    ok_exits: &[i32],
) -> Result<(), EnvError> {
    let o = &res.outcome;
    match o.status {
        Status::Ok => Ok(()),
        Status::Exit if !res.cancelled && o.exit_code.is_some_and(|c| ok_exits.contains(&c)) => {
            Ok(())
        }
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
        Status::Exit | Status::Signal | Status::Error | Status::Stopped => {
            let how = match (o.exit_code, o.signal) {
                (_, Some(sig)) => format!("the {step} step was killed by signal {sig}"),
                (Some(code), _) => format!("the {step} step exited with code {code}"),
                _ => format!("the {step} step failed"),
            };
            let message = if said.is_empty() { how } else { said };
            Err(EnvError::Build { message })
        }
    }
}
