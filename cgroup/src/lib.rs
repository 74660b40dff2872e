//! cgroup v1 and v2 job managers behind one trait.
//!
//! The caller (CLI or supervisor) runs once: [`detect`] the mode, then
//! [`resolve_parents`] to find and create the parent cgroup directories. It
//! hands the resulting map (controller name -> directory) to the jailer as
//! plain data. The jailer rebuilds a [`Manager`] from it with [`manager`],
//! creates one [`JobCgroup`] per run with its limits written before any
//! process enters, attaches the jail's init, polls [`JobCgroup::usage`],
//! kills and destroys.
//!
//! Nothing here starts threads or logs; every failure is a [`CgroupError`].
//! File logic takes directory paths and the `/proc` parsers are pure, so
//! both can be exercised on temporary directories and sample text.

mod error;
mod fs;
mod limits;
pub mod mountinfo;
mod resolve;
mod v1;
mod v2;

pub use error::CgroupError;
pub use limits::{Limits, Usage, CPU_PERIOD_US};
pub use resolve::{
    detect, resolve_parents, v2_move_self_to_leaf, version_from_magic, ParentPath, V2_REQUIRED,
};
pub use v1::{V1Job, V1Manager, V1_CONTROLLERS};
pub use v2::{V2Job, V2Manager, UNIFIED};

use std::collections::BTreeMap;
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};

/// The cgroup mode of the host. Hybrid hosts count as V1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    V1,
    V2,
}

impl Version {
    /// `"v1"` or `"v2"`, as reported in outcomes.
    pub fn as_str(self) -> &'static str {
        match self {
            Version::V1 => "v1",
            Version::V2 => "v2",
        }
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Creates, lists and removes job cgroups under the parent(s).
pub trait Manager: std::fmt::Debug {
    fn version(&self) -> Version;
    /// Create `<parent>/<name>` in every hierarchy and write `limits`
    /// before returning. `name` must match `[A-Za-z0-9_-]{1,64}`. Refuses
    /// an existing job directory; on failure nothing is left behind.
    fn create_job(&self, name: &str, limits: &Limits) -> Result<Box<dyn JobCgroup>, CgroupError>;
    /// Job directories left under the parent(s), for crash clean-up.
    fn list_jobs(&self) -> Result<Vec<String>, CgroupError>;
    /// Kill everything in the job, then remove its directories. A job that
    /// does not exist is not an error.
    fn remove_job(&self, name: &str) -> Result<(), CgroupError>;
}

/// One job's cgroup (one directory per hierarchy on v1).
pub trait JobCgroup: std::fmt::Debug {
    /// Move `pid` (a whole process) into the job.
    fn attach(&self, pid: libc::pid_t) -> Result<(), CgroupError>;
    /// v2 only: an `O_DIRECTORY|O_CLOEXEC` fd of the job directory, for
    /// `clone3(CLONE_INTO_CGROUP)`.
    fn dir_fd(&self) -> Option<BorrowedFd<'_>>;
    /// Current figures; absent optional files give `None`.
    fn usage(&self) -> Result<Usage, CgroupError>;
    /// SIGKILL everything in the job and wait (bounded, ~2 s) until it is
    /// empty. v2 uses `cgroup.kill` where the kernel has it.
    fn kill(&self) -> Result<(), CgroupError>;
    /// rmdir every directory (and any child cgroup), retrying on EBUSY for
    /// about 2 s.
    fn destroy(self: Box<Self>) -> Result<(), CgroupError>;
    /// Whether swap is limited too (v1: `memory.memsw.*`, v2:
    /// `memory.swap.max` exist).
    fn enforces_swap(&self) -> bool;
    /// The job's directories.
    fn paths(&self) -> Vec<PathBuf>;
}

/// Check a job (or leaf) cgroup name: `[A-Za-z0-9_-]{1,64}`.
pub fn validate_name(name: &str) -> Result<(), CgroupError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(CgroupError::BadJobName {
            name: name.to_string(),
        })
    }
}

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
    fn job_names() {
        for good in ["a", "job-1_X", &"x".repeat(64)] {
            validate_name(good).unwrap();
        }
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "a b",
            "é",
            "a.b",
            "x\n",
            &"x".repeat(65),
        ] {
            let e = validate_name(bad).unwrap_err();
            assert!(matches!(e, CgroupError::BadJobName { .. }), "{bad:?}");
        }
    }

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
