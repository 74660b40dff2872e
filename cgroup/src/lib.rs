//! cgroup v1 and v2 job managers behind one trait.
//!
//! The caller (CLI or supervisor) runs once: [`detect`] the mode, then
//! [`resolve_parents`] to find and create the parent cgroup directories. It
//! hands the resulting map (controller name -> directory) to the jailer as
//! plain data. The jailer rebuilds a [`Manager`] from it with [`manager`],
//! creates one [`JobCgroup`] per run with its limits written before any
//! process enters, attaches the jail's init, polls [`JobCgroup::usage`],
//! kills and destroys. A job that outlives one run (a live interpreter)
//! is reopened by the supervisor with [`Manager::open_job`], which can then
//! change its limits and CPU priority and measure each call's peak memory
//! with a [`PeakMeter`].
//!
//! Nothing here starts threads or logs (the jailer, single-threaded, uses
//! it); every failure is a [`CgroupError`].
//!
//! It owns every read and write of cgroup files. It must never write a
//! cgroup file it does not own: only the job cgroups it creates, the
//! parents it creates for them, and the `cgroup.subtree_control` of the
//! cgroups from the delegation boundary down to those parents, never above
//! the boundary. It never depends on another PRIMS crate.
//! File logic takes directory paths and the `/proc` parsers are pure, so
//! both can be exercised on temporary directories and sample text.

mod error;
mod fs;
mod job;
mod limits;
pub mod mountinfo;
mod name;
mod peak;
mod priority;
mod resolve;
mod v1;
mod v2;

pub use error::CgroupError;
pub use job::{JobCgroup, Manager, Version};
pub use limits::{Limits, Usage, CPU_PERIOD_US};
pub use name::validate_name;
pub use peak::PeakMeter;
pub use priority::CpuPriority;
pub use resolve::{
    detect, resolve_parents, v2_move_self_to_leaf, version_from_magic, ParentPath, V2_REQUIRED,
};
pub use v1::{V1Job, V1Manager, V1_CONTROLLERS};
pub use v2::{V2Job, V2Manager, UNIFIED};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn check_fs(path: &Path, version: Version) -> Result<(), CgroupError> {
    let want = match version {
        Version::V1 => fs::CGROUP_SUPER_MAGIC,
        Version::V2 => fs::CGROUP2_SUPER_MAGIC,
    };
    let magic = fs::fs_magic(path).map_err(|source| CgroupError::OpenDir {
        path: path.to_path_buf(),
        source,
    })?;
    if magic != want {
        return Err(CgroupError::NotCgroupFs {
            path: path.to_path_buf(),
            version: version.as_str(),
            magic,
        });
    }
    Ok(())
}

/// Rebuild a manager from the parent map made by [`resolve_parents`]
/// (v1: `memory`, `pids`, `cpu`, `cpuacct`; v2: `unified`). Each directory
/// must be on a cgroup filesystem of that version.
pub fn manager(
    version: Version,
    parents: &BTreeMap<String, PathBuf>,
) -> Result<Box<dyn Manager>, CgroupError> {
    match version {
        Version::V1 => {
            let m = V1Manager::new(parents)?;
            for d in m.parent_dirs() {
                check_fs(&d, version)?;
            }
            Ok(Box::new(m))
        }
        Version::V2 => {
            let m = V2Manager::new(parents)?;
            check_fs(m.parent(), version)?;
            Ok(Box::new(m))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manager_refuses_non_cgroup_dirs() {
        let d = tempfile::tempdir().unwrap();
        let p = BTreeMap::from([(UNIFIED.to_string(), d.path().to_path_buf())]);
        let e = manager(Version::V2, &p).expect_err("a tmp dir is not cgroup2");
        assert!(matches!(e, CgroupError::NotCgroupFs { .. }), "{e}");
        let p: BTreeMap<String, PathBuf> = V1_CONTROLLERS
            .iter()
            .map(|c| (c.to_string(), d.path().to_path_buf()))
            .collect();
        let e = manager(Version::V1, &p).expect_err("a tmp dir is not cgroupfs");
        assert!(matches!(e, CgroupError::NotCgroupFs { .. }), "{e}");
    }
}
