//! Host-side helpers: unique markers, process-table scans, workspace
//! directories, file owners, and running python on the host outside any jail.

use crate::child::{run_with_timeout, RawOutput};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A marker unique to this test process and call: `<tag>-<pid>-<n>-<nanos>`.
pub fn unique(tag: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("prims-{tag}-{}-{n}-{nanos}", std::process::id())
}

/// Runs `code` with the host's `/usr/bin/python3 -I -c`, outside any jail, as
/// the test user (root). Used to show that a probe's result in the jail is
/// due to the jail.
pub fn host_python(code: &str) -> RawOutput {
    let mut cmd = Command::new("/usr/bin/python3");
    cmd.arg("-I").arg("-c").arg(code);
    run_with_timeout(cmd, Duration::from_secs(30))
}

/// Host processes (other than this one) whose `/proc/<pid>/cmdline`
/// contains `marker`, as `(pid, cmdline)`.
pub fn processes_with_marker(marker: &str) -> Vec<(i32, String)> {
    let me = std::process::id() as i32;
    let mut found = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return found;
    };
    for ent in rd.flatten() {
        let Ok(pid) = ent.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(cmd) = std::fs::read(ent.path().join("cmdline")) else {
            continue;
        };
        if cmd.windows(marker.len()).any(|w| w == marker.as_bytes()) {
            let s = String::from_utf8_lossy(&cmd).replace('\0', " ");
            found.push((pid, s));
        }
    }
    found
}

/// Fails the test if any process carrying `marker` survives; first SIGKILLs
/// those processes (they were started by this test) so nothing is left over.
pub fn assert_no_survivors(marker: &str, context: &str) {
    let found = processes_with_marker(marker);
    if found.is_empty() {
        return;
    }
    for (pid, _) in &found {
        // SAFETY: plain kill(2) of a process this test's job started.
        unsafe {
            libc::kill(*pid, libc::SIGKILL);
        }
    }
    panic!(
        "{} process(es) with marker {marker} survived the run ({context}): {found:?} \
         (the test has now SIGKILLed them)",
        found.len()
    );
}

/// A fresh directory for a `--workspace`, removed on drop.
pub fn workspace_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("prims-test-ws-")
        .tempdir()
        .expect("tempdir")
}

/// `stat(2)` owner of a path without following a final symlink.
pub fn owner(p: &Path) -> (u32, u32) {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(p).unwrap_or_else(|e| panic!("lstat {}: {e}", p.display()));
    (m.uid(), m.gid())
}
