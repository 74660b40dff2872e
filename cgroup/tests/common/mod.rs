//! Helpers for the tests that use the real cgroup hierarchies of this host.
//! They need root and fail loudly without it: they never skip.

#![allow(dead_code)] // each test binary uses a different subset

pub mod v1;
pub mod v2;

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub fn require_root() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "this test writes the host's real cgroup hierarchies and must run as root (CI runs as root); \
         run `sudo -E cargo test -p prims-cgroup`"
    );
}

/// A per-process, per-test cgroup name.
pub fn unique(tag: &str) -> String {
    format!("prims-test-{}-{tag}", std::process::id())
}

pub fn python() -> &'static str {
    if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

/// Removes cgroup directories on drop, even when the test failed: SIGKILL
/// whatever is inside, then rmdir innermost first.
pub struct CgroupCleanup(pub Vec<PathBuf>);

impl Drop for CgroupCleanup {
    fn drop(&mut self) {
        for d in &self.0 {
            remove_cgroup_tree(d);
        }
    }
}

fn remove_cgroup_tree(dir: &Path) {
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_cgroup_tree(&e.path());
            }
        }
    }
    let deadline = Instant::now() + Duration::from_secs(3);
    while dir.exists() {
        if let Ok(s) = fs::read_to_string(dir.join("cgroup.procs")) {
            for pid in s.split_whitespace().filter_map(|p| p.parse::<i32>().ok()) {
                // SAFETY: plain syscall on a pid > 0 listed in a test cgroup.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        if fs::remove_dir(dir).is_ok() || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A child process killed and reaped on drop.
pub struct Kid(pub Child);

impl Kid {
    pub fn spawn(cmd: &mut Command) -> Kid {
        Kid(cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn child"))
    }

    pub fn pid(&self) -> i32 {
        i32::try_from(self.0.id()).expect("pid fits i32")
    }

    /// Let a child that waits on `sys.stdin.readline()` go.
    pub fn go(&mut self) {
        let stdin = self.0.stdin.as_mut().expect("piped stdin");
        stdin.write_all(b"go\n").expect("write to child");
        stdin.flush().expect("flush");
    }

    /// Wait at most `timeout` for the child to end.
    pub fn wait_for(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(st) = self.0.try_wait().expect("try_wait") {
                return st;
            }
            assert!(
                Instant::now() < deadline,
                "child {} still running after {timeout:?}",
                self.pid()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn stdout(&mut self) -> String {
        let mut s = String::new();
        if let Some(mut o) = self.0.stdout.take() {
            std::io::Read::read_to_string(&mut o, &mut s).expect("read child stdout");
        }
        s
    }
}

/// A child's stdout, line by line.
pub struct Lines(BufReader<ChildStdout>);

impl Lines {
    pub fn of(kid: &mut Kid) -> Lines {
        Lines(BufReader::new(kid.0.stdout.take().expect("piped stdout")))
    }

    /// The next line must be `want` (a child that died gives EOF: "").
    pub fn expect(&mut self, want: &str) {
        let mut line = String::new();
        self.0.read_line(&mut line).expect("read child stdout");
        assert_eq!(line.trim_end(), want, "child said {line:?}");
    }
}

/// A Python child for the peak-memory tests. At each line on stdin: touch
/// 64 MiB and free it ("freed"), then touch 32 MiB and hold it
/// ("holding"), then exit.
pub const PEAK_SCRIPT: &str = "\
import sys
sys.stdin.readline()
b = b'\\1' * (64 << 20)
del b
print('freed', flush=True)
sys.stdin.readline()
c = b'\\1' * (32 << 20)
print('holding', flush=True)
sys.stdin.readline()
";

pub const MIB: u64 = 1 << 20;

/// The limits the live-job tests create their jobs with.
pub const START: prims_cgroup::Limits = prims_cgroup::Limits {
    memory_bytes: 256 << 20,
    swap_bytes: 0,
    pids: 32,
    cpu_millis: 500,
};

/// Lower than [`START`] in every field.
pub const LOWER: prims_cgroup::Limits = prims_cgroup::Limits {
    memory_bytes: 32 << 20,
    swap_bytes: 0,
    pids: 8,
    cpu_millis: 250,
};

/// Run [`PEAK_SCRIPT`] in the job `created` up to "freed", and check
/// through `job` (the same job, reopened) that its lifetime peak saw the
/// 64 MiB and that they are freed.
pub fn peak_child_after_free(
    created: &dyn prims_cgroup::JobCgroup,
    job: &dyn prims_cgroup::JobCgroup,
) -> (Kid, Lines) {
    let mut kid = Kid::spawn(Command::new(python()).args(["-c", PEAK_SCRIPT]));
    let mut out = Lines::of(&mut kid);
    created.attach(kid.pid()).expect("attach");
    kid.go();
    out.expect("freed");
    let u = job.usage().expect("usage");
    let lifetime = u.memory_peak_bytes.expect("peak");
    assert!(lifetime >= 64 * MIB, "lifetime peak {lifetime}");
    let current = u.memory_current_bytes.expect("current");
    assert!(current < 32 * MIB, "64 MiB freed, yet {current} held");
    (kid, out)
}

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn assert_sigkilled(st: ExitStatus) {
    assert_eq!(
        st.signal(),
        Some(libc::SIGKILL),
        "expected death by SIGKILL, got {st:?}"
    );
}

pub fn procs(dir: &Path) -> Vec<i32> {
    fs::read_to_string(dir.join("cgroup.procs"))
        .expect("read cgroup.procs")
        .split_whitespace()
        .map(|p| p.parse().expect("pid"))
        .collect()
}

pub fn read_trim(p: &Path) -> String {
    fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
        .trim()
        .to_string()
}
