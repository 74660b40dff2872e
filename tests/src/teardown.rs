//! Tearing down a whole state directory and its cgroup parent, as tests and
//! benchmarks do after a supervisor they started has been killed. Never
//! part of the product: the supervisor cleans up after itself.

use std::path::{Path, PathBuf};

/// Detach every mount at or below `dir` (a state directory's session
/// images), deepest first.
pub fn unmount_below(dir: &Path) {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return;
    };
    let mut points: Vec<String> = info
        .lines()
        .filter_map(|l| l.split(' ').nth(4).map(str::to_string))
        .filter(|p| Path::new(p).starts_with(dir))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for p in points {
        if let Ok(c) = std::ffi::CString::new(p) {
            // SAFETY: umount2 with a NUL-terminated path and a flag.
            unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

/// rmdir every cgroup directory called `name` (and its empty job
/// directories) in every hierarchy under /sys/fs/cgroup.
pub fn remove_cgroup_parent(name: &str) {
    for p in cgroup_dirs_named(name) {
        for job in std::fs::read_dir(&p).into_iter().flatten().flatten() {
            if job.file_type().is_ok_and(|t| t.is_dir()) {
                let _ = std::fs::remove_dir(job.path());
            }
        }
        let _ = std::fs::remove_dir(&p);
    }
}

/// Every cgroup directory called `name` in every hierarchy under
/// /sys/fs/cgroup (a test supervisor's cgroup parent, in each controller).
pub fn cgroup_dirs_named(name: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for root in std::fs::read_dir("/sys/fs/cgroup")
        .into_iter()
        .flatten()
        .flatten()
    {
        find_named(&root.path(), name, 0, &mut found);
    }
    found
}

fn find_named(dir: &Path, name: &str, depth: usize, found: &mut Vec<PathBuf>) {
    if depth > 6 {
        return;
    }
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let p = e.path();
        if e.file_name().to_str() == Some(name) {
            found.push(p);
        } else {
            find_named(&p, name, depth + 1, found);
        }
    }
}
