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

use super::build_job::BuildJob;
use super::key::Settings;
use super::staging::BuildVolume;
use prims_protocol::jail::{Bind, JobLimits, JobSpec, NetworkMode, VENV_PYTHON};
use std::path::{Path, PathBuf};

/// AF_UNIX and AF_INET: uv speaks to the proxy on the jail's loopback.
pub(super) const SOCKET_FAMILIES: [i32; 2] = [libc::AF_UNIX, libc::AF_INET];
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
        cgroup: job.jails.cgroup(cgroup_job),
        host_uid: job.build_uid,
        host_gid: job.build_uid,
        argv: Vec::new(),
        env: Vec::new(),
        binds: Vec::new(),
        venv_writable: true,
        proxy_port: 0,
        cpu: Default::default(),
        fork: Default::default(),
    }
}

/// `uv pip install` as an install jail runs it, for the venv at `/venv`
/// and through the proxy: the policy's index, extra indexes and
/// `find_links` (a host directory bound read-only at its own path), wheels
/// only unless the policy says otherwise. The caller adds the cache and
/// what to install.
pub(super) struct UvCommand {
    pub argv: Vec<String>,
    pub binds: Vec<Bind>,
    pub env: Vec<String>,
    pub ro_binds: Vec<PathBuf>,
}

pub(super) fn uv_command(s: &Settings, uv: &Path) -> UvCommand {
    let uv_dir = uv.parent().unwrap_or(Path::new("/")).to_path_buf();
    let uv_name = uv.file_name().map_or("uv".into(), |n| n.to_string_lossy());
    let mut argv: Vec<String> = vec![format!("/opt/uv/{uv_name}")];
    argv.extend(
        ["pip", "install", "--python", VENV_PYTHON, "--no-config"]
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
    let mut binds = vec![Bind {
        source: uv_dir,
        target: "/opt/uv".into(),
        writable: false,
    }];
    for l in &s.find_links {
        argv.extend(["--find-links".into(), l.clone()]);
        let p = Path::new(l);
        if p.is_absolute() && p.is_dir() {
            binds.push(Bind {
                source: p.to_path_buf(),
                target: p.to_path_buf(),
                writable: false,
            });
        }
    }
    let mut env: Vec<String> = [
        "UV_PYTHON_DOWNLOADS=never",
        "UV_NO_PROGRESS=1",
        "UV_LINK_MODE=copy",
        "UV_COMPILE_BYTECODE=0",
        "NO_COLOR=1",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    env.extend(crate::egress::proxy_env());
    let mut ro_binds = s.ro_binds.clone();
    ro_binds.push(PathBuf::from(crate::egress::CA_DIR));
    UvCommand {
        argv,
        binds,
        env,
        ro_binds,
    }
}

/// Step 1: `uv pip install` through the proxy.
pub(super) fn uv_spec(job: &BuildJob, vol: &BuildVolume, cgroup_job: &str) -> JobSpec {
    let UvCommand {
        mut argv,
        mut binds,
        mut env,
        ro_binds,
    } = uv_command(&job.settings, &job.uv);
    binds.push(Bind {
        source: vol.cache(),
        target: "/uv-cache".into(),
        writable: true,
    });
    argv.push("--".into());
    argv.extend(job.packages.iter().cloned());
    env.push("UV_CACHE_DIR=/uv-cache".into());
    JobSpec {
        network: NetworkMode::Proxy,
        proxy_port: crate::egress::JAIL_PORT,
        socket_families: SOCKET_FAMILIES.to_vec(),
        ro_binds,
        argv,
        env,
        binds,
        ..base_spec(job, vol, cgroup_job)
    }
}

/// Step 2: compile the bytecode of `targets` (entries of the venv's
/// site-packages, by name), offline, with site disabled. `unchecked-hash`
/// .pyc files stay valid however the files are copied afterwards, and the
/// environment never changes once built.
pub(super) fn compile_spec(
    job: &BuildJob,
    vol: &BuildVolume,
    cgroup_job: &str,
    targets: &[String],
) -> JobSpec {
    let site = format!("/venv/lib/python{}/site-packages", job.version);
    let mut argv: Vec<String> = [
        VENV_PYTHON,
        "-I",
        "-S",
        "-m",
        "compileall",
        "-q",
        "--invalidation-mode",
        "unchecked-hash",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    argv.extend(targets.iter().map(|t| format!("{site}/{t}")));
    JobSpec {
        argv,
        ..base_spec(job, vol, cgroup_job)
    }
}

/// Paths under `site` (the host path of the venv's site-packages), in `n`
/// groups of about the same number of Python files, for `n` compile jails
/// at once: compileall's own workers need POSIX semaphores, which a jail (no
/// /dev/shm) has not. A directory much bigger than a fair share (pandas) is
/// split into its entries, so the groups come out even.
pub(super) fn compile_groups(site: &Path, n: usize) -> Vec<Vec<String>> {
    fn count(p: &Path) -> usize {
        match std::fs::symlink_metadata(p) {
            Ok(m) if m.is_dir() => std::fs::read_dir(p)
                .map(|rd| rd.flatten().map(|e| count(&e.path())).sum())
                .unwrap_or(0),
            Ok(m) if m.is_file() => usize::from(p.extension().is_some_and(|e| e == "py")),
            _ => 0,
        }
    }
    fn entries(site: &Path, rel: &str) -> Vec<(usize, String)> {
        std::fs::read_dir(site.join(rel))
            .map(|rd| {
                rd.flatten()
                    .filter_map(|e| {
                        let name = e.file_name().into_string().ok()?;
                        let c = count(&e.path());
                        let path = if rel.is_empty() {
                            name
                        } else {
                            format!("{rel}/{name}")
                        };
                        (c > 0).then_some((c, path))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
    let n = n.max(1);
    let mut units = entries(site, "");
    let total: usize = units.iter().map(|u| u.0).sum();
    let share = (total / (2 * n)).max(1);
    while units.len() < 64 * n {
        units.sort();
        let Some(&(c, ref path)) = units.last() else {
            break;
        };
        if c <= share || !site.join(path).is_dir() {
            break;
        }
        let path = path.clone();
        units.pop();
        units.extend(entries(site, &path));
    }
    units.sort_by(|a, b| b.cmp(a));
    let mut groups: Vec<(usize, Vec<String>)> = vec![(0, Vec::new()); n];
    for (c, path) in units {
        if let Some(g) = groups.iter_mut().min_by_key(|g| g.0) {
            g.0 += c;
            g.1.push(path);
        }
    }
    groups
        .into_iter()
        .map(|g| g.1)
        .filter(|g| !g.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn py_files(root: &Path, rel: &str, out: &mut Vec<String>) {
        let p = root.join(rel);
        if p.is_dir() {
            for e in std::fs::read_dir(&p).unwrap().flatten() {
                let name = e.file_name().into_string().unwrap();
                let r = if rel.is_empty() {
                    name
                } else {
                    format!("{rel}/{name}")
                };
                py_files(root, &r, out);
            }
        } else if rel.ends_with(".py") {
            out.push(rel.to_string());
        }
    }

    #[test]
    fn compile_groups_cover_every_file_once_and_split_big_packages() {
        let d = tempfile::tempdir().unwrap();
        let site = d.path();
        for i in 0..40 {
            let dir = site.join(format!("big/sub{}", i % 4));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(format!("m{i}.py")), "x = 1\n").unwrap();
        }
        std::fs::write(site.join("big/__init__.py"), "").unwrap();
        std::fs::create_dir_all(site.join("small")).unwrap();
        std::fs::write(site.join("small/a.py"), "").unwrap();
        std::fs::write(site.join("six.py"), "").unwrap();
        std::fs::create_dir_all(site.join("data-only")).unwrap();
        std::fs::write(site.join("data-only/x.txt"), "").unwrap();

        let groups = compile_groups(site, 2);
        assert_eq!(groups.len(), 2);
        let mut seen = Vec::new();
        let mut sizes = Vec::new();
        for g in &groups {
            let mut files = Vec::new();
            for path in g {
                py_files(site, path, &mut files);
            }
            sizes.push(files.len());
            seen.extend(files);
        }
        let mut all = Vec::new();
        py_files(site, "", &mut all);
        let unique: BTreeSet<_> = seen.iter().collect();
        assert_eq!(unique.len(), seen.len(), "a file in two groups: {groups:?}");
        assert_eq!(unique, all.iter().collect(), "{groups:?}");
        let (a, b) = (sizes[0] as i64, sizes[1] as i64);
        assert!((a - b).abs() <= 11, "uneven groups {sizes:?}: {groups:?}");
        assert!(groups.iter().flatten().all(|p| p != "data-only"));
    }
}
