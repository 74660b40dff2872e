//! Choosing the cgroup backend for this host and resolving where job cgroups
//! go, once, before any jailer runs.

use prims_cgroup::{CgroupError, Version};
use prims_policy::Policy;
use prims_protocol::{CgroupBackend, CgroupSpec};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The backend and parent directories that job cgroups are created under.
#[derive(Debug, Clone)]
pub struct Parents {
    pub backend: CgroupBackend,
    pub dirs: BTreeMap<String, PathBuf>,
}

impl Parents {
    pub fn spec_for(&self, job: &str) -> CgroupSpec {
        CgroupSpec {
            backend: self.backend,
            parents: self.dirs.clone(),
            job: job.to_string(),
        }
    }
}

pub fn resolve(policy: &Policy) -> Result<Parents, CgroupError> {
    let version = match policy.cgroup.backend {
        CgroupBackend::None => {
            return Ok(Parents {
                backend: CgroupBackend::None,
                dirs: BTreeMap::new(),
            })
        }
        CgroupBackend::V1 => Version::V1,
        CgroupBackend::V2 => Version::V2,
        CgroupBackend::Auto => prims_cgroup::detect()?,
    };
    let dirs = prims_cgroup::resolve_parents(version, &policy.cgroup.parent)?;
    let backend = match version {
        Version::V1 => CgroupBackend::V1,
        Version::V2 => CgroupBackend::V2,
    };
    Ok(Parents { backend, dirs })
}

/// Remove a job cgroup a jailer left behind (it crashed or was killed).
pub fn remove_job(parents: &Parents, job: &str) -> Result<(), CgroupError> {
    let version = match parents.backend {
        CgroupBackend::V1 => Version::V1,
        CgroupBackend::V2 => Version::V2,
        _ => return Ok(()),
    };
    let manager = prims_cgroup::manager(version, &parents.dirs)?;
    if manager.list_jobs()?.iter().any(|j| j == job) {
        manager.remove_job(job)?;
    }
    Ok(())
}
