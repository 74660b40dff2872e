//! Where this process sits in the v2 hierarchy.

use super::{read_trim, require_root, unique, CgroupCleanup};
use prims_cgroup::{mountinfo, V2_REQUIRED};
use std::path::PathBuf;

/// The directory of this process's own v2 cgroup.
pub fn own_v2_dir() -> PathBuf {
    let mi = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let mounts = mountinfo::parse_mountinfo(&mi);
    let m = mountinfo::v2_mounts(&mounts);
    assert!(
        !m.is_empty(),
        "no cgroup2 mount in /proc/self/mountinfo: these tests need the unified hierarchy \
         (/sys/fs/cgroup on v2 hosts, /sys/fs/cgroup/unified on hybrid hosts)"
    );
    let pc = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let entries = mountinfo::parse_proc_cgroup(&pc);
    let own = mountinfo::own_v2_path(&entries).expect("a 0:: line in /proc/self/cgroup");
    let root = mountinfo::components(&m[0].root);
    let own = mountinfo::components(own);
    let rel = own
        .strip_prefix(root.as_slice())
        .expect("own cgroup below the mount root");
    let mut d = m[0].mount_point.clone();
    d.extend(rel);
    d
}

/// A fresh parent directory below our own v2 cgroup, removed on drop.
pub fn v2_parent(tag: &str) -> (PathBuf, CgroupCleanup) {
    require_root();
    let dir = own_v2_dir().join(unique(tag));
    std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
    (dir.clone(), CgroupCleanup(vec![dir]))
}

pub fn wanted_controllers_enabled(parent: &std::path::Path) -> bool {
    let sc = read_trim(&parent.join("cgroup.subtree_control"));
    V2_REQUIRED
        .iter()
        .all(|c| sc.split_whitespace().any(|x| x == *c))
}
