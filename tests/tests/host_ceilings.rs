//! The host-wide ceilings a fork template raises through a real supervisor
//! (`fs.inotify.max_user_instances` and `max_user_watches`: each must hold
//! a jail's share for every child the policy allows at once, the
//! supervisor's `interpreters/fork/budgets.rs`) go back to what they were
//! at the supervisor's clean stop, also after a crash and a restart; one
//! that something else changed since is left as it is.
//!
//! These tests write host-wide sysctls, which every supervisor on the host
//! (and `kernel_budgets.rs`) depends on. So they sit in a test binary of
//! their own (cargo runs test binaries one after another), take a lock
//! file that serializes them with any other process that takes it, even
//! another run of this binary, and put back the host's values at the end,
//! pass or fail ([`HostSysctls`]). Each lowers `max_user_instances` by one
//! only, to just under what its supervisor's template needs, so that
//! other supervisors on the host lose next to nothing meanwhile.

use prims_protocol::jail::JAIL_INOTIFY_INSTANCES;
use prims_tests::daemon::Daemon;
use prims_tests::forked::forked_session;
use prims_tests::live::{live_policy, NO_POOL};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

const INSTANCES: &str = "/proc/sys/fs/inotify/max_user_instances";
const WATCHES: &str = "/proc/sys/fs/inotify/max_user_watches";
/// Where the supervisor records what it raised, in its state directory.
const RECORD: &str = "raised-sysctls.json";
/// Taken by every test that writes these sysctls.
const LOCK: &str = "/run/lock/prims-tests-host-sysctls.lock";

/// Templates on, no pool, the default `sessions.max_sessions` (256).
fn policy() -> String {
    live_policy(&format!("{NO_POOL}fork_templates = true\n"), "")
}

/// What the template needs of `max_user_instances`: a jail's share for
/// each of 256 sessions, no spare and the one start beside them.
fn needed() -> u64 {
    JAIL_INOTIFY_INSTANCES * (256 + 1)
}

fn read(path: &str) -> u64 {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn write(path: &str, value: u64) {
    std::fs::write(path, value.to_string()).unwrap_or_else(|e| panic!("{path} = {value}: {e}"));
}

/// Holds the lock on these sysctls and what they were when it was taken;
/// dropped (also by a failing test's unwinding), writes those back, then
/// lets go of the lock.
struct HostSysctls {
    was: Vec<(&'static str, u64)>,
    _lock: std::fs::File,
}

impl HostSysctls {
    fn take() -> HostSysctls {
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(LOCK)
            .unwrap_or_else(|e| panic!("{LOCK}: {e}"));
        // SAFETY: flock has no memory-safety preconditions; the fd is open.
        let locked = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) };
        assert_eq!(
            locked,
            0,
            "flock {LOCK}: {}",
            std::io::Error::last_os_error()
        );
        HostSysctls {
            was: [INSTANCES, WATCHES].map(|p| (p, read(p))).to_vec(),
            _lock: lock,
        }
    }
}

impl Drop for HostSysctls {
    fn drop(&mut self) {
        for (path, value) in &self.was {
            if let Err(e) = std::fs::write(path, value.to_string()) {
                eprintln!("CEILINGS could not put {path} back to {value}: {e}");
            }
        }
    }
}

/// A supervisor with templates on whose template is up: the ceiling is
/// raised by then.
async fn supervisor_with_a_template() -> Daemon {
    let d = Daemon::start(&policy());
    let c = d.client().await;
    forked_session(&d, &c).await;
    d
}

fn record_of(d: &Daemon) -> PathBuf {
    d.state.join(RECORD)
}

fn recorded(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", path.display()))
}

#[tokio::test(flavor = "multi_thread")]
async fn host_ceilings_a_raised_ceiling_is_put_back_at_a_clean_stop() {
    let host = HostSysctls::take();
    let low = needed() - 1;
    write(INSTANCES, low);
    let watches = read(WATCHES);
    let mut d = supervisor_with_a_template().await;
    assert_eq!(read(INSTANCES), needed(), "{}", d.log());
    assert_eq!(
        recorded(&record_of(&d))["raised"][0],
        serde_json::json!({"sysctl": "fs.inotify.max_user_instances", "was": low, "set": needed()}),
    );

    let stopped = d.stop_gracefully().expect("a running supervisor");
    assert!(stopped.success(), "{stopped}\n{}", d.log());
    assert_eq!(read(INSTANCES), low, "{}", d.log());
    // The watches, raised or not (the host's may have been high enough), are as they were.
    assert_eq!(read(WATCHES), watches, "{}", d.log());
    assert!(!record_of(&d).exists(), "{:?}", recorded(&record_of(&d)));
    let log = d.log();
    assert!(
        log.contains("put back a host-wide ceiling that this server had raised")
            && log.contains("fs.inotify.max_user_instances"),
        "{log}"
    );
    drop(d);
    drop(host);
}

#[tokio::test(flavor = "multi_thread")]
async fn host_ceilings_one_changed_since_is_left_as_it_is() {
    let host = HostSysctls::take();
    let low = needed() - 1;
    write(INSTANCES, low);
    let mut d = supervisor_with_a_template().await;
    assert_eq!(read(INSTANCES), needed(), "{}", d.log());
    // Another writer (an operator, another server that needs more).
    let theirs = needed() + 1;
    write(INSTANCES, theirs);

    let stopped = d.stop_gracefully().expect("a running supervisor");
    assert!(stopped.success(), "{stopped}\n{}", d.log());
    assert_eq!(read(INSTANCES), theirs, "{}", d.log());
    assert!(!record_of(&d).exists(), "{:?}", recorded(&record_of(&d)));
    let log = d.log();
    assert!(
        log.contains("left a host-wide ceiling that this server had raised as it is")
            && log.contains(&format!("now={theirs}")),
        "{log}"
    );
    drop(d);
    drop(host);
}

#[tokio::test(flavor = "multi_thread")]
async fn host_ceilings_a_crash_leaves_the_record_for_the_next_clean_stop() {
    let host = HostSysctls::take();
    let low = needed() - 1;
    write(INSTANCES, low);
    let mut d = supervisor_with_a_template().await;
    assert_eq!(read(INSTANCES), needed(), "{}", d.log());
    // kill -9: no clean stop. The next start finds the ceiling high enough
    // and raises nothing; the record stays.
    d.crash_and_restart();
    let c = d.client().await;
    forked_session(&d, &c).await;
    assert_eq!(read(INSTANCES), needed(), "{}", d.log());
    assert_eq!(
        recorded(&record_of(&d))["raised"][0]["was"],
        serde_json::json!(low)
    );

    let stopped = d.stop_gracefully().expect("a running supervisor");
    assert!(stopped.success(), "{stopped}\n{}", d.log());
    assert_eq!(read(INSTANCES), low, "{}", d.log());
    assert!(!record_of(&d).exists());
    drop(d);
    drop(host);
}
