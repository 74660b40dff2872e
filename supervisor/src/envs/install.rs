//! The two jails of an environment build, as job specs. Neither has the
//! host's network or sees anything of the host writable but the build's own
//! volume (see `staging`).
//!
//! 1. uv resolves, downloads and installs into the staging venv. Its only
//!    way out is the proxy (see `proxy`), which reaches the package index
//!    hosts and nothing else. It sees the package cache through an overlay
//!    whose upper layer is on the volume. No bytecode is compiled here:
//!    compiling imports with `site` on, which runs any `.pth` a wheel ships.
//! 2. Python compiles the venv's bytecode with no network at all and with
//!    site disabled (`python -I -S -m compileall`), so no package code runs.
//!
//! uv copies files out of its cache (`UV_LINK_MODE=copy`): the venv must
//! never share an inode with anything a later build could reach.

use super::build::BuildJob;
use super::staging::BuildVolume;
use prims_protocol::{Bind, JobLimits, JobSpec, NetworkMode};
use std::path::{Path, PathBuf};

const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";
/// AF_UNIX and AF_INET: uv speaks to the proxy on the jail's loopback.
const SOCKET_FAMILIES: [i32; 2] = [libc::AF_UNIX, libc::AF_INET];
const BUILD_PIDS: u64 = 512;
const BUILD_OPEN_FILES: u64 = 4096;
const BUILD_TMP_SIZE: u64 = 256 << 20;
/// uv's output kept by the runner; the error message keeps far less.
const BUILD_OUTPUT: u64 = 1 << 20;

fn limits(job: &BuildJob) -> JobLimits {
    let s = &job.settings;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
    let wall_ms = u64::try_from(s.build_timeout.as_millis()).unwrap_or(u64::MAX);
    JobLimits {
        wall_time_ms: wall_ms,
        cpu_time_ms: wall_ms.saturating_mul(cores),
        memory_bytes: s.build_memory,
        swap_bytes: 0,
        pids: BUILD_PIDS,
        open_files: BUILD_OPEN_FILES,
        // The volume bounds what a build writes; no file may be larger.
        file_size_bytes: s.build_disk,
        output_bytes: BUILD_OUTPUT,
        tmp_size_bytes: BUILD_TMP_SIZE,
        cpu_millis: cores.saturating_mul(1000),
    }
}

fn base_spec(job: &BuildJob, vol: &BuildVolume, cgroup_job: &str) -> JobSpec {
    let s = &job.settings;
    JobSpec {
        interpreter: job.interpreter.clone(),
        venv: vol.venv(),
        workspace: vol.work(),
        code: String::new(),
        limits: limits(job),
        network: NetworkMode::None,
        ro_binds: s.ro_binds.clone(),
        seccomp_extra_deny: s.seccomp_extra_deny.clone(),
        socket_families: vec![libc::AF_UNIX],
        landlock_required: s.landlock_required,
        cgroup: job.cgroup.spec_for(cgroup_job),
        host_uid: job.build_uid,
        host_gid: job.build_uid,
        argv: Vec::new(),
        env: Vec::new(),
        binds: Vec::new(),
        venv_writable: true,
        proxy_port: 0,
    }
}

/// Step 1: `uv pip install` through the proxy.
pub fn uv_spec(job: &BuildJob, vol: &BuildVolume, cgroup_job: &str) -> JobSpec {
    let s = &job.settings;
    let uv_dir = job.uv.parent().unwrap_or(Path::new("/")).to_path_buf();
    let uv_name = job
        .uv
        .file_name()
        .map_or("uv".into(), |n| n.to_string_lossy());
    let mut argv: Vec<String> = vec![format!("/opt/uv/{uv_name}")];
    argv.extend(
        [
            "pip",
            "install",
            "--python",
            "/venv/bin/python",
            "--no-config",
        ]
        .into_iter()
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
            source: vol.cache(),
            target: "/uv-cache".into(),
            writable: true,
        },
    ];
    for l in &s.find_links {
        argv.extend(["--find-links".into(), l.clone()]);
        // A wheel directory on the host is visible, read-only, at its path.
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
    let proxy = format!("http://127.0.0.1:{}", super::proxy::PORT);
    let mut env: Vec<String> = [
        "UV_CACHE_DIR=/uv-cache",
        "UV_PYTHON_DOWNLOADS=never",
        "UV_NO_PROGRESS=1",
        "UV_LINK_MODE=copy",
        "UV_COMPILE_BYTECODE=0",
        "NO_COLOR=1",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    for var in [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
    ] {
        env.push(format!("{var}={proxy}"));
    }
    if Path::new(CA_BUNDLE).is_file() {
        env.push(format!("SSL_CERT_FILE={CA_BUNDLE}"));
    }
    let mut ro_binds = s.ro_binds.clone();
    ro_binds.push(PathBuf::from("/etc/ssl"));
    JobSpec {
        network: NetworkMode::Proxy,
        proxy_port: super::proxy::PORT,
        socket_families: SOCKET_FAMILIES.to_vec(),
        ro_binds,
        argv,
        env,
        binds,
        ..base_spec(job, vol, cgroup_job)
    }
}

/// Step 2: compile the venv's bytecode, offline, with site disabled.
/// `unchecked-hash` .pyc files stay valid however the files are copied
/// afterwards, and the environment never changes once built.
pub fn compile_spec(job: &BuildJob, vol: &BuildVolume, cgroup_job: &str) -> JobSpec {
    let site = format!("/venv/lib/python{}/site-packages", job.version);
    let argv = [
        "/venv/bin/python",
        "-I",
        "-S",
        "-m",
        "compileall",
        "-q",
        "--invalidation-mode",
        "unchecked-hash",
        &site,
    ]
    .into_iter()
    .map(String::from)
    .collect();
    JobSpec {
        argv,
        ..base_spec(job, vol, cgroup_job)
    }
}
