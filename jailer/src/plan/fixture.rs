//! Job specs for the plan's unit tests: one as the supervisor writes it, and
//! one whose host paths exist, in a temporary directory.

use prims_protocol::jail::{CgroupBackend, CgroupSpec, JobLimits, JobSpec, NetworkMode};
use std::path::PathBuf;
use tempfile::TempDir;

/// A spec with every limit set and nothing unusual; its host paths need not
/// exist.
pub fn spec() -> JobSpec {
    JobSpec {
        interpreter: PathBuf::from("/usr/bin/python3.11"),
        venv: PathBuf::from("/var/lib/prims/envs/base"),
        workspace: PathBuf::from("/var/lib/prims/sessions/s1/workspace"),
        code: "print('hi')".into(),
        limits: JobLimits {
            wall_time_ms: 10_000,
            cpu_time_ms: 5_000,
            memory_bytes: 256 << 20,
            swap_bytes: 16 << 20,
            pids: 32,
            open_files: 128,
            file_size_bytes: 8 << 20,
            output_bytes: 256 << 10,
            tmp_size_bytes: 32 << 20,
            cpu_millis: 500,
        },
        network: NetworkMode::None,
        ro_binds: ["/usr", "/lib", "/lib64", "/etc/ssl"]
            .map(PathBuf::from)
            .to_vec(),
        seccomp_extra_deny: vec![],
        socket_families: vec![libc::AF_UNIX],
        landlock_required: false,
        cgroup: CgroupSpec {
            backend: CgroupBackend::None,
            parents: Default::default(),
            job: "job-1".into(),
        },
        host_uid: 100_000,
        host_gid: 100_000,
        argv: vec![],
        env: vec![],
        binds: vec![],
        venv_writable: false,
        proxy_port: 0,
        cpu: Default::default(),
        fork: Default::default(),
    }
}

/// [`spec`] with an interpreter file, a venv holding `bin/python` and a
/// workspace made for it; they live as long as `dir`.
pub struct OnHost {
    pub dir: TempDir,
    pub spec: JobSpec,
}

pub fn on_host() -> OnHost {
    let dir = tempfile::tempdir().expect("temporary directory");
    let root = dir.path();
    let venv = root.join("venv");
    std::fs::create_dir_all(venv.join("bin")).expect("venv/bin");
    std::fs::write(venv.join("bin/python"), b"").expect("venv python");
    std::fs::write(root.join("python3"), b"").expect("interpreter");
    std::fs::create_dir(root.join("workspace")).expect("workspace");
    let spec = JobSpec {
        interpreter: root.join("python3"),
        venv,
        workspace: root.join("workspace"),
        ..spec()
    };
    OnHost { dir, spec }
}
