//! Job specs for tests that drive the jailer or `Jails` directly, without
//! the CLI: [`JailFiles`] holds a bare venv on the host's python and a
//! workspace owned by the job's host uid; [`JailFiles::spec`] a spec on
//! them with small limits. And [`Lines`], python's side of a pipe or
//! socket read line by line.

use prims_protocol::jail::{CgroupSpec, JobLimits, JobSpec, NetworkMode};
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;

/// The host interpreter the venv points at.
pub const INTERPRETER: &str = "/usr/bin/python3.11";

/// A venv and a workspace that live as long as this value.
pub struct JailFiles {
    pub venv: tempfile::TempDir,
    pub workspace: tempfile::TempDir,
    pub host_uid: u32,
}

impl JailFiles {
    /// A venv made the way the supervisor makes one (`pyvenv.cfg` and a
    /// symlink) and a workspace owned by `host_uid`.
    pub fn new(host_uid: u32) -> JailFiles {
        let venv = tempfile::Builder::new()
            .prefix("prims-test-venv-")
            .tempdir()
            .expect("venv dir");
        std::fs::create_dir_all(venv.path().join("bin")).expect("venv/bin");
        std::os::unix::fs::symlink(INTERPRETER, venv.path().join("bin/python"))
            .expect("venv python");
        std::fs::write(
            venv.path().join("pyvenv.cfg"),
            "home = /usr/bin\ninclude-system-site-packages = false\n",
        )
        .expect("pyvenv.cfg");
        let workspace = crate::host::workspace_dir();
        std::os::unix::fs::chown(workspace.path(), Some(host_uid), Some(host_uid))
            .expect("chown workspace");
        JailFiles {
            venv,
            workspace,
            host_uid,
        }
    }

    /// A spec running `code` in `cgroup`, with a wall time of `wall_ms`,
    /// which also ends a test that hangs.
    pub fn spec(&self, code: &str, cgroup: CgroupSpec, wall_ms: u64) -> JobSpec {
        JobSpec {
            interpreter: INTERPRETER.into(),
            venv: self.venv.path().to_path_buf(),
            workspace: self.workspace.path().to_path_buf(),
            code: code.into(),
            limits: JobLimits {
                wall_time_ms: wall_ms,
                cpu_time_ms: wall_ms,
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
            cgroup,
            host_uid: self.host_uid,
            host_gid: self.host_uid,
            argv: Vec::new(),
            env: Vec::new(),
            binds: Vec::new(),
            venv_writable: false,
            proxy_port: 0,
            cpu_idle: false,
        }
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
