//! A fresh v1 parent per test, below this process's own cgroups.

use super::{require_root, unique, CgroupCleanup};
use prims_cgroup::*;
use std::collections::BTreeMap;
use std::path::PathBuf;

pub struct Setup {
    pub parents: BTreeMap<String, PathBuf>,
    pub m: Box<dyn Manager>,
    // Last field: dropped after everything else.
    _cleanup: CgroupCleanup,
}

pub fn setup(tag: &str) -> Setup {
    require_root();
    assert_eq!(
        detect().expect("detect"),
        Version::V1,
        "these tests expect a cgroup v1/hybrid host (/sys/fs/cgroup on tmpfs)"
    );
    let parents = resolve_parents(Version::V1, &unique(tag)).expect("resolve_parents v1");
    let mut dirs: Vec<PathBuf> = parents.values().cloned().collect();
    dirs.sort();
    dirs.dedup();
    let cleanup = CgroupCleanup(dirs);
    let m = manager(Version::V1, &parents).expect("manager v1");
    Setup {
        parents,
        m,
        _cleanup: cleanup,
    }
}

pub fn job_file(s: &Setup, ctl: &str, job: &str, file: &str) -> PathBuf {
    s.parents[ctl].join(job).join(file)
}
