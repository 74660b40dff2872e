//! What both managers implement: the cgroup version, the manager of job
//! cgroups under the parents, one job's cgroup, and the names a job may have.

use crate::error::CgroupError;
use crate::limits::{Limits, Usage};
use std::os::fd::BorrowedFd;
use std::path::PathBuf;

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
}
