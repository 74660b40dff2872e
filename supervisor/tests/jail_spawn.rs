//! `Jails::spawn`: a jail that outlives the call that starts it, in a real
//! job cgroup. Its python talks over the channel, is found and interrupted
//! through `python_pidfd`, and ends by `kill`, by its channel closing, or
//! by its owner dropping it; the job cgroup goes with it every time.

use prims_policy::Policy;
use prims_protocol::jail::Status;
use prims_supervisor::job::{
    resolve_parents, send_sigint, Jails, JobNames, PythonPidError, Spawned,
};
use prims_tests::jail_spec::{JailFiles, Lines};
use prims_tests::{jailer_bin, require_root, unique};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const HOST_UID: u32 = 202_200;
/// Ends a jail whose test hung.
const WALL_MS: u64 = 120_000;
/// A hang guard for waits on the host side, never a timing claim.
const HANG_GUARD: Duration = Duration::from_secs(60);

/// Writes `ready <pid>` on the channel, then echoes each line from the
/// channel to stdout until EOF. A KeyboardInterrupt prints its traceback,
/// answers `interrupted` and goes on; `orphan` leaves a process behind
/// that the init adopts.
const ECHO_PY: &str = r#"
import os, sys, time, traceback
os.write(3, b'ready %d\n' % os.getpid())
buf = b''
while True:
    # An interrupt may land anywhere, even just after an answer went out.
    try:
        chunk = os.read(3, 4096)
        if not chunk:
            break
        buf += chunk
        while b'\n' in buf:
            line, buf = buf.split(b'\n', 1)
            if line == b'orphan':
                if os.fork() == 0:
                    if os.fork() == 0:
                        time.sleep(120)
                        os._exit(0)
                    os._exit(0)
                os.wait()
                os.write(3, b'orphaned\n')
            else:
                print(line.decode(), flush=True)
    except KeyboardInterrupt:
        traceback.print_exc()
        os.write(3, b'interrupted\n')
"#;

/// Jails under a cgroup parent of this test's own, removed on drop.
struct Setup {
    jails: Jails,
    parent: String,
    files: JailFiles,
}

impl Setup {
    fn new() -> Setup {
        require_root();
        let parent = unique("spawn-parent");
        let policy = Policy::from_toml_str(&format!("[cgroup]\nparent = \"{parent}\"\n"))
            .expect("test policy");
        let parents = resolve_parents(&policy).expect("cgroup parents");
        Setup {
            jails: Jails {
                jailer: jailer_bin(),
                parents,
                names: JobNames::of_process(),
                trust: None,
            },
            parent,
            files: JailFiles::new(HOST_UID),
        }
    }

    /// A jail running `code` as job `job`, and our end of its channel.
    fn spawn(&self, code: &str, job: &str) -> (Spawned, UnixStream) {
        let spec = self.files.spec(code, self.jails.cgroup(job), WALL_MS);
        let (ours, theirs) = UnixStream::pair().expect("socketpair");
        let jail = self
            .jails
            .spawn(&spec, theirs.into(), None, None)
            .expect("spawn");
        (jail, ours)
    }

    /// The job's cgroup directories, one per hierarchy.
    fn job_dirs(&self, job: &str) -> Vec<PathBuf> {
        let dirs: Vec<PathBuf> = self
            .jails
            .parents
            .dirs
            .values()
            .map(|d| d.join(job))
            .collect();
        assert!(!dirs.is_empty(), "this host has cgroups");
        dirs
    }

    fn cgroup_exists(&self, job: &str) -> Vec<PathBuf> {
        self.job_dirs(job)
            .into_iter()
            .filter(|d| d.exists())
            .collect()
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        prims_tests::teardown::remove_cgroup_parent(&self.parent);
    }
}

/// The `Pid` and `NSpid` lines of a pidfd's fdinfo.
fn pidfd_info(fd: &impl AsRawFd) -> (String, String) {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd()))
        .expect("fdinfo of a pidfd");
    let line = |key: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(key))
            .unwrap_or_else(|| panic!("no {key} in {info}"))
            .trim()
            .to_string()
    };
    (line("Pid:"), line("NSpid:"))
}

fn until_gone(what: &str, mut gone: impl FnMut() -> bool) {
    let deadline = Instant::now() + HANG_GUARD;
    while !gone() {
        assert!(
            Instant::now() < deadline,
            "{what} still there after {HANG_GUARD:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_spawned_jail_lives_across_messages_until_killed() {
    let s = Setup::new();
    let job = unique("spawn");
    let (mut jail, ours) = s.spawn(ECHO_PY, &job);
    let mut chan = Lines::new(ours.try_clone().unwrap());
    let mut to_jail = ours;
    let mut stdout = Lines::new(File::from(jail.take_stdout().unwrap()));
    let mut stderr = Lines::new(File::from(jail.take_stderr().unwrap()));
    assert!(jail.take_stdout().is_none(), "stdout is handed out once");
    // python is pid 2 of the jail.
    assert_eq!(chan.next_line().as_deref(), Some("ready 2"));
    assert_eq!(s.cgroup_exists(&job), s.job_dirs(&job), "the job cgroup");

    to_jail.write_all(b"one\n").unwrap();
    assert_eq!(stdout.next_line().as_deref(), Some("one"));

    // An orphan adopted by the init does not hide python.
    to_jail.write_all(b"orphan\n").unwrap();
    assert_eq!(chan.next_line().as_deref(), Some("orphaned"));
    let pidfd = jail.python_pidfd().expect("python's pidfd");
    let (pid, nspid) = pidfd_info(&pidfd);
    assert_eq!(nspid, format!("{pid}\t2"), "the pidfd is pid 2 of the jail");

    send_sigint(std::os::fd::AsFd::as_fd(&pidfd)).expect("SIGINT");
    assert_eq!(chan.next_line().as_deref(), Some("interrupted"));
    let trace = stderr.until("KeyboardInterrupt");
    assert!(
        trace[0].starts_with("Traceback (most recent call last):"),
        "{trace:#?}"
    );
    // The same python, its state and loop intact, goes on.
    to_jail.write_all(b"two\n").unwrap();
    assert_eq!(stdout.next_line().as_deref(), Some("two"));

    jail.kill();
    let outcome = jail.wait();
    assert_eq!(
        (outcome.status, outcome.signal),
        (Status::Signal, Some(libc::SIGKILL)),
        "{outcome:?}"
    );
    // The jailer could not remove the cgroup; wait did, with the orphan.
    assert_eq!(s.cgroup_exists(&job), Vec::<PathBuf>::new());
    assert_eq!(stdout.next_line(), None, "python's stdout is closed");
    assert_eq!(chan.next_line(), None, "the channel is closed");
}

#[test]
fn a_spawned_jail_ends_when_its_channel_closes() {
    let s = Setup::new();
    let job = unique("spawn");
    let (jail, ours) = s.spawn(ECHO_PY, &job);
    let mut chan = Lines::new(ours.try_clone().unwrap());
    assert_eq!(chan.next_line().as_deref(), Some("ready 2"));
    jail.python_pidfd().expect("python while it runs");
    drop(chan);
    ours.shutdown(std::net::Shutdown::Both).unwrap();
    drop(ours);
    // python leaves its loop and exits 0; from then on there is no python
    // to signal.
    until_gone("python", || match jail.python_pidfd() {
        Ok(_) => false,
        Err(PythonPidError::NotRunning(_)) => true,
        Err(e) => panic!("{e}"),
    });
    let outcome = jail.wait();
    assert_eq!(
        (outcome.status, outcome.exit_code),
        (Status::Ok, Some(0)),
        "{outcome:?}"
    );
    assert_eq!(s.cgroup_exists(&job), Vec::<PathBuf>::new());
}

#[test]
fn a_dropped_jail_is_killed_and_its_cgroup_removed() {
    let s = Setup::new();
    let job = unique("spawn");
    let (jail, ours) = s.spawn(ECHO_PY, &job);
    let mut chan = Lines::new(ours);
    assert_eq!(chan.next_line().as_deref(), Some("ready 2"));
    assert_eq!(s.cgroup_exists(&job), s.job_dirs(&job));
    drop(jail);
    // The jail died with its jailer: the channel closes.
    assert_eq!(chan.next_line(), None);
    until_gone("the job cgroup", || s.cgroup_exists(&job).is_empty());
}

#[test]
fn a_jail_that_cannot_be_built_closes_the_channel_and_says_why() {
    let s = Setup::new();
    let job = unique("spawn");
    let mut spec = s.files.spec(ECHO_PY, s.jails.cgroup(&job), WALL_MS);
    spec.workspace = "/nonexistent/prims-workspace".into();
    let (mut ours, theirs) = UnixStream::pair().unwrap();
    let mut jail = s
        .jails
        .spawn(&spec, theirs.into(), None, None)
        .expect("spawn");
    let mut got = Vec::new();
    ours.read_to_end(&mut got).unwrap();
    assert!(got.is_empty(), "{got:?}");
    let mut stdout = Vec::new();
    File::from(jail.take_stdout().unwrap())
        .read_to_end(&mut stdout)
        .unwrap();
    assert!(matches!(
        jail.python_pidfd(),
        Err(PythonPidError::NotRunning(_))
    ));
    let outcome = jail.wait();
    assert_eq!(outcome.status, Status::SetupError, "{outcome:?}");
    let e = outcome.setup_error.expect("why");
    assert_eq!((e.step.as_str(), e.errno), ("input", Some(libc::ENOENT)));
    assert_eq!(s.cgroup_exists(&job), Vec::<PathBuf>::new());
}
