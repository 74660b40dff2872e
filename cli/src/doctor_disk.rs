//! `prims doctor`'s disk check: the most the policy lets PRIMS put on the
//! state directory's filesystem, against what that filesystem can give.
//! Sessions and builds reserve their space when they start (so they are
//! refused, never starved, when it runs out); the worst case says how many
//! of them the disk can actually hold.

use prims_policy::{Policy, SessionQuota};
use prims_supervisor::envs::MAX_CONCURRENT_BUILDS;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Bytes of each part of the worst case, by name.
pub fn worst_case(p: &Policy) -> Vec<(String, u64)> {
    let mut parts = Vec::new();
    if p.sessions.quota == SessionQuota::Loop {
        parts.push((
            format!(
                "{} sessions × {} (sessions.max_sessions × sessions.disk_quota)",
                p.sessions.max_sessions, p.sessions.disk_quota
            ),
            u64::from(p.sessions.max_sessions).saturating_mul(p.sessions.disk_quota.0),
        ));
    }
    parts.push((
        format!(
            "environments ({}, python.env_cache_bytes)",
            p.python.env_cache_bytes
        ),
        p.python.env_cache_bytes.0,
    ));
    parts.push((
        format!(
            "package cache ({}, python.cache_bytes)",
            p.python.cache_bytes
        ),
        p.python.cache_bytes.0,
    ));
    parts.push((
        format!(
            "{MAX_CONCURRENT_BUILDS} builds × {} (python.build_disk)",
            p.python.build_disk
        ),
        (MAX_CONCURRENT_BUILDS as u64).saturating_mul(p.python.build_disk.0),
    ));
    parts
}

/// Space the state directory already holds (it counts as available to it).
fn held(state_dir: &Path) -> u64 {
    fn walk(dir: &Path, total: &mut u64, dev: u64) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let Ok(m) = std::fs::symlink_metadata(e.path()) else {
                continue;
            };
            // Stay on this filesystem: mounted workspaces and environments
            // live in image files, which are counted where they lie.
            if m.dev() != dev {
                continue;
            }
            *total = total.saturating_add(m.blocks().saturating_mul(512));
            if m.is_dir() {
                walk(&e.path(), total, dev);
            }
        }
    }
    let Ok(m) = std::fs::metadata(state_dir) else {
        return 0;
    };
    let mut total = 0;
    walk(state_dir, &mut total, m.dev());
    total
}

fn gib(n: u64) -> String {
    format!("{:.1} GiB", n as f64 / (1u64 << 30) as f64)
}

/// (fits, message).
pub fn check(p: &Policy, state_dir: &Path) -> Result<(bool, String), String> {
    let probe = if state_dir.exists() {
        state_dir
    } else {
        state_dir.parent().unwrap_or(Path::new("/"))
    };
    let st = nix::sys::statvfs::statvfs(probe)
        .map_err(|e| format!("statvfs {}: {e}", probe.display()))?;
    let free = st.blocks_available().saturating_mul(st.fragment_size());
    let held = held(state_dir);
    let room = (free + held).saturating_sub(p.sessions.min_free_disk.0);
    let parts = worst_case(p);
    let worst: u64 = parts.iter().map(|(_, b)| b).sum();
    let list: Vec<String> = parts.iter().map(|(what, _)| what.clone()).collect();
    let msg = format!(
        "disk: the policy's worst case is {} ({}); the state directory's filesystem can give {} ({} free + {} already held, less {} sessions.min_free_disk)",
        gib(worst),
        list.join(" + "),
        gib(room),
        gib(free),
        gib(held),
        p.sessions.min_free_disk,
    );
    Ok((worst <= room, msg))
}
