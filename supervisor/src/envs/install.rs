//! The install jail's job spec.
//!
//! The install jail has the host network and sees, writable, only the
//! staging venv (at `/venv`) and uv's cache (at `/uv-cache`); uv itself is
//! bound read-only at `/opt/uv`. uv copies files out of its cache
//! (`UV_LINK_MODE=copy`) rather than hardlinking them: a hardlinked
//! environment would share inodes with a cache that every later install jail
//! may write, so one build (an sdist's build script, when `only_binary` is
//! off) could rewrite files of environments other sessions import.

use super::build::BuildJob;
use super::EnvError;
use prims_protocol::{Bind, JobLimits, JobSpec, NetworkMode};
use std::path::{Path, PathBuf};

/// Files an install jail needs to resolve names and check certificates.
const NETWORK_FILES: [&str; 4] = [
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/nsswitch.conf",
    "/etc/ssl",
];
const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";
/// AF_UNIX, AF_INET, AF_INET6, AF_NETLINK (name resolution asks netlink).
const SOCKET_FAMILIES: [i32; 4] = [1, 2, 10, 16];
const BUILD_PIDS: u64 = 512;
const BUILD_OPEN_FILES: u64 = 4096;
const BUILD_FILE_SIZE: u64 = 4 << 30;
const BUILD_TMP_SIZE: u64 = 256 << 20;
/// uv's output kept by the runner; the error message keeps far less.
const BUILD_OUTPUT: u64 = 1 << 20;
pub fn install_spec(job: &BuildJob, venv: &Path, work: &Path, cache: &Path, cg: &str) -> JobSpec {
    let s = &job.settings;
    let uv_dir = job.uv.parent().unwrap_or(Path::new("/")).to_path_buf();
    let uv_name = job
        .uv
        .file_name()
        .map_or("uv".into(), |n| n.to_string_lossy());
    let mut argv: Vec<String> = vec![format!("/opt/uv/{uv_name}")];
    argv.extend(
        ["pip", "install", "--python", "/venv/bin/python"]
            .into_iter()
            .chain(["--compile-bytecode", "--no-config"])
            .map(String::from),
    );
    if s.only_binary {
        argv.extend(["--only-binary".into(), ":all:".into()]);
    }
    if !s.index_url.is_empty() {
        argv.extend(["--index-url".into(), s.index_url.clone()]);
    }
    for u in &s.extra_index_urls {
        argv.extend(["--extra-index-url".into(), u.clone()]);
    }
    let mut binds = vec![
        Bind {
            source: uv_dir,
            target: "/opt/uv".into(),
            writable: false,
        },
        Bind {
            source: cache.to_path_buf(),
            target: "/uv-cache".into(),
            writable: true,
        },
    ];
    for l in &s.find_links {
        argv.extend(["--find-links".into(), l.clone()]);
        // A wheel directory on the host is visible at the same path.
        let p = Path::new(l);
        if p.is_absolute() && p.is_dir() {
            binds.push(Bind {
                source: p.to_path_buf(),
                target: p.to_path_buf(),
                writable: false,
            });
        }
    }
    argv.push("--".into());
    argv.extend(job.packages.iter().cloned());
    let mut ro_binds = s.ro_binds.clone();
    ro_binds.extend(NETWORK_FILES.map(PathBuf::from));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
    let wall_ms = u64::try_from(s.build_timeout.as_millis()).unwrap_or(u64::MAX);
    JobSpec {
        interpreter: job.interpreter.clone(),
        venv: venv.to_path_buf(),
        workspace: work.to_path_buf(),
        code: String::new(),
        limits: JobLimits {
            wall_time_ms: wall_ms,
            cpu_time_ms: wall_ms.saturating_mul(cores),
            memory_bytes: s.build_memory,
            swap_bytes: 0,
            pids: BUILD_PIDS,
            open_files: BUILD_OPEN_FILES,
            file_size_bytes: BUILD_FILE_SIZE,
            output_bytes: BUILD_OUTPUT,
            tmp_size_bytes: BUILD_TMP_SIZE,
            cpu_millis: cores.saturating_mul(1000),
        },
        network: NetworkMode::Host,
        ro_binds,
        seccomp_extra_deny: s.seccomp_extra_deny.clone(),
        socket_families: SOCKET_FAMILIES.to_vec(),
        landlock_required: s.landlock_required,
        cgroup: job.cgroup.spec_for(cg),
        host_uid: job.build_uid,
        host_gid: job.build_uid,
        argv,
        env: [
            "UV_CACHE_DIR=/uv-cache",
            "UV_PYTHON_DOWNLOADS=never",
            "UV_NO_PROGRESS=1",
            "UV_LINK_MODE=copy",
            "NO_COLOR=1",
        ]
        .into_iter()
        .map(String::from)
        .chain(
            Path::new(CA_BUNDLE)
                .is_file()
                .then(|| format!("SSL_CERT_FILE={CA_BUNDLE}")),
        )
        .collect(),
        binds,
        venv_writable: true,
    }
}

pub fn chown(path: &Path, uid: u32) -> Result<(), EnvError> {
    std::os::unix::fs::lchown(path, Some(uid), Some(uid)).map_err(EnvError::io("chowning", path))
}

pub fn chown_tree(dir: &Path, uid: u32) -> Result<(), EnvError> {
    chown(dir, uid)?;
    let rd = std::fs::read_dir(dir).map_err(EnvError::io("reading", dir))?;
    for ent in rd {
        let ent = ent.map_err(EnvError::io("reading", dir))?;
        let path = ent.path();
        if ent.file_type().is_ok_and(|t| t.is_dir()) {
            chown_tree(&path, uid)?;
        } else {
            chown(&path, uid)?;
        }
    }
    Ok(())
}
