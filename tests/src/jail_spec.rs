//! Job specs for tests that drive the jailer or `Jails` directly, without
//! the CLI: [`SpecBuilder`] (from [`job_spec`]) makes a spec with small
//! limits that a test changes with setters; [`JailFiles`] holds a bare venv
//! on the host's python and a workspace owned by the job's host uid, and
//! [`JailFiles::spec`] a spec on them. And [`Lines`], python's side of a
//! pipe or socket read line by line.

use prims_protocol::jail::{CgroupBackend, CgroupSpec, JobLimits, JobSpec, NetworkMode};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

/// The host interpreter the venv points at.
pub const INTERPRETER: &str = "/usr/bin/python3.11";

/// The host uid (and gid) a [`job_spec`] maps jail uid 1000 to unless told.
pub const HOST_UID: u32 = 200_000;

/// A job cgroup of no backend (the jail gets none), named after `tag`.
pub fn no_cgroup(tag: &str) -> CgroupSpec {
    CgroupSpec {
        backend: CgroupBackend::None,
        parents: Default::default(),
        job: crate::host::unique(tag),
    }
}

/// A [`SpecBuilder`] with its defaults.
pub fn job_spec() -> SpecBuilder {
    SpecBuilder::default()
}

/// A job spec as a test wants it. The defaults: [`INTERPRETER`], venv and
/// workspace `/nonexistent`, no code; limits of 10 s wall and CPU time,
/// 256 MiB of memory and no swap, 32 processes, 256 open files, 16 MiB
/// files and `/tmp`, 1 MiB of output, one CPU; no network; `/usr`, `/lib`,
/// `/lib64` and `/bin` bound read-only; Unix sockets only; Landlock best
/// effort; [`no_cgroup`]; host uid and gid [`HOST_UID`]; nothing else.
#[derive(Debug, Clone)]
pub struct SpecBuilder(JobSpec);

impl Default for SpecBuilder {
    fn default() -> SpecBuilder {
        SpecBuilder(JobSpec {
            interpreter: INTERPRETER.into(),
            venv: "/nonexistent".into(),
            workspace: "/nonexistent".into(),
            code: String::new(),
            limits: JobLimits {
                wall_time_ms: 10_000,
                cpu_time_ms: 10_000,
                memory_bytes: 256 << 20,
                swap_bytes: 0,
                pids: 32,
                open_files: 256,
                file_size_bytes: 16 << 20,
                output_bytes: 1 << 20,
                tmp_size_bytes: 16 << 20,
                cpu_millis: 1000,
            },
            network: NetworkMode::None,
            ro_binds: ["/usr", "/lib", "/lib64", "/bin"]
                .map(PathBuf::from)
                .to_vec(),
            seccomp_extra_deny: Vec::new(),
            socket_families: vec![libc::AF_UNIX],
            landlock_required: false,
            cgroup: no_cgroup("job"),
            host_uid: HOST_UID,
            host_gid: HOST_UID,
            argv: Vec::new(),
            env: Vec::new(),
            binds: Vec::new(),
            venv_writable: false,
            proxy_port: 0,
            cpu: Default::default(),
            fork: Default::default(),
        })
    }
}

impl SpecBuilder {
    pub fn venv(mut self, venv: impl AsRef<Path>) -> SpecBuilder {
        self.0.venv = venv.as_ref().to_path_buf();
        self
    }

    pub fn workspace(mut self, workspace: impl AsRef<Path>) -> SpecBuilder {
        self.0.workspace = workspace.as_ref().to_path_buf();
        self
    }

    pub fn code(mut self, code: &str) -> SpecBuilder {
        self.0.code = code.into();
        self
    }

    /// Every limit at once.
    pub fn limits(mut self, limits: JobLimits) -> SpecBuilder {
        self.0.limits = limits;
        self
    }

    /// The wall time, which also ends a test that hangs.
    pub fn wall_ms(mut self, ms: u64) -> SpecBuilder {
        self.0.limits.wall_time_ms = ms;
        self
    }

    pub fn cpu_ms(mut self, ms: u64) -> SpecBuilder {
        self.0.limits.cpu_time_ms = ms;
        self
    }

    pub fn output_bytes(mut self, bytes: u64) -> SpecBuilder {
        self.0.limits.output_bytes = bytes;
        self
    }

    pub fn cgroup(mut self, cgroup: CgroupSpec) -> SpecBuilder {
        self.0.cgroup = cgroup;
        self
    }

    /// The host uid and gid jail uid 1000 maps to.
    pub fn host_id(mut self, id: u32) -> SpecBuilder {
        self.0.host_uid = id;
        self.0.host_gid = id;
        self
    }

    pub fn build(self) -> JobSpec {
        self.0
    }
}

/// A venv made the way the supervisor makes one (`pyvenv.cfg` and a
/// symlink to [`INTERPRETER`]), in a temporary directory.
pub fn bare_venv() -> tempfile::TempDir {
    let venv = tempfile::Builder::new()
        .prefix("prims-test-venv-")
        .tempdir()
        .expect("venv dir");
    std::fs::create_dir_all(venv.path().join("bin")).expect("venv/bin");
    std::os::unix::fs::symlink(INTERPRETER, venv.path().join("bin/python")).expect("venv python");
    std::fs::write(
        venv.path().join("pyvenv.cfg"),
        "home = /usr/bin\ninclude-system-site-packages = false\n",
    )
    .expect("pyvenv.cfg");
    venv
}

/// A venv and a workspace that live as long as this value.
pub struct JailFiles {
    pub venv: tempfile::TempDir,
    pub workspace: tempfile::TempDir,
    pub host_uid: u32,
}

impl JailFiles {
    /// A [`bare_venv`] and a workspace owned by `host_uid`.
    pub fn new(host_uid: u32) -> JailFiles {
        let venv = bare_venv();
        let workspace = crate::host::workspace_dir();
        std::os::unix::fs::chown(workspace.path(), Some(host_uid), Some(host_uid))
            .expect("chown workspace");
        JailFiles {
            venv,
            workspace,
            host_uid,
        }
    }

    /// A spec running `code` in `cgroup`, with a wall (and CPU) time of
    /// `wall_ms`, which also ends a test that hangs.
    pub fn spec(&self, code: &str, cgroup: CgroupSpec, wall_ms: u64) -> JobSpec {
        job_spec()
            .venv(self.venv.path())
            .workspace(self.workspace.path())
            .code(code)
            .wall_ms(wall_ms)
            .cpu_ms(wall_ms)
            .cgroup(cgroup)
            .host_id(self.host_uid)
            .build()
    }
}

/// Lines from a jail's pipe or socket. A read blocks until the line
/// comes or the writer is gone: the job's wall time bounds the wait.
pub struct Lines<R: Read>(BufReader<R>);

impl<R: Read> Lines<R> {
    pub fn new(r: R) -> Lines<R> {
        Lines(BufReader::new(r))
    }

    /// The next line without its newline; `None` at EOF.
    pub fn next_line(&mut self) -> Option<String> {
        let mut line = String::new();
        match self.0.read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line.trim_end_matches('\n').to_string()),
        }
    }

    /// Lines up to and including the first that contains `needle`; panics
    /// at EOF, showing what came.
    pub fn until(&mut self, needle: &str) -> Vec<String> {
        let mut seen = Vec::new();
        loop {
            match self.next_line() {
                Some(l) => {
                    let found = l.contains(needle);
                    seen.push(l);
                    if found {
                        return seen;
                    }
                }
                None => panic!("EOF before a line with {needle:?}; got {seen:#?}"),
            }
        }
    }
}
