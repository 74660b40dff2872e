//! Choosing the cgroup backend for this host and resolving where job cgroups
//! go, once, before any jailer runs.

use prims_cgroup::{CgroupError, Version};
use prims_policy::Policy;
use prims_protocol::jail::{CgroupBackend, CgroupSpec};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The backend and parent directories that job cgroups are created under.
#[derive(Debug, Clone)]
pub struct Parents {
    pub backend: CgroupBackend,
    pub dirs: BTreeMap<String, PathBuf>,
}

impl Parents {
    /// No cgroups: the `none` backend.
    pub fn none() -> Parents {
        Parents {
            backend: CgroupBackend::None,
            dirs: BTreeMap::new(),
        }
    }

    pub(super) fn spec_for(&self, job: &str) -> CgroupSpec {
        CgroupSpec {
            backend: self.backend,
            parents: self.dirs.clone(),
            job: job.to_string(),
        }
    }
}

pub fn resolve(policy: &Policy) -> Result<Parents, CgroupError> {
    let version = match policy.cgroup.backend {
        CgroupBackend::None => return Ok(Parents::none()),
        CgroupBackend::V1 => Version::V1,
        CgroupBackend::V2 => Version::V2,
        CgroupBackend::Auto => prims_cgroup::detect()?,
    };
    let dirs = match prims_cgroup::resolve_parents(version, &policy.cgroup.parent) {
        // A process alone in a delegated v2 cgroup (`systemd-run --scope -p
        // Delegate=yes prims run …`) steps into a leaf so its own cgroup may
        // hand controllers to job cgroups.
        Err(CgroupError::NotDelegated { .. })
            if version == Version::V2 && alone_in_own_v2_cgroup() =>
        {
            prims_cgroup::v2_move_self_to_leaf("prims-self")?;
            prims_cgroup::resolve_parents(version, &policy.cgroup.parent)?
        }
        other => other?,
    };
    let backend = match version {
        Version::V1 => CgroupBackend::V1,
        Version::V2 => CgroupBackend::V2,
    };
    Ok(Parents { backend, dirs })
}

/// True when this process is the only one in its own v2 cgroup.
fn alone_in_own_v2_cgroup() -> bool {
    use prims_cgroup::mountinfo::{own_v2_path, parse_mountinfo, parse_proc_cgroup, v2_mounts};
    let (Ok(mi), Ok(pc)) = (
        std::fs::read_to_string("/proc/self/mountinfo"),
        std::fs::read_to_string("/proc/self/cgroup"),
    ) else {
        return false;
    };
    let entries = parse_proc_cgroup(&pc);
    let Some(own) = own_v2_path(&entries) else {
        return false;
    };
    let mounts = parse_mountinfo(&mi);
    let Some(mount) = v2_mounts(&mounts).into_iter().find(|m| m.root == "/") else {
        return false;
    };
    let procs = mount
        .mount_point
        .join(own.trim_start_matches('/'))
        .join("cgroup.procs");
    let me = std::process::id().to_string();
    std::fs::read_to_string(procs).is_ok_and(|t| t.lines().eq([me.as_str()]))
}

/// The job manager for these parents; an error for the `none` backend.
pub fn manager(parents: &Parents) -> Result<Box<dyn prims_cgroup::Manager>, CgroupError> {
    let version = match parents.backend {
        CgroupBackend::V2 => Version::V2,
        _ => Version::V1,
    };
    prims_cgroup::manager(version, &parents.dirs)
}

/// Remove a job cgroup a jailer left behind (it crashed or was killed).
fn remove_job(parents: &Parents, job: &str) -> Result<(), CgroupError> {
    if parents.backend == CgroupBackend::None {
        return Ok(());
    }
    manager(parents)?.remove_job(job)
}

/// [`remove_job`], logging a failure: a leftover cgroup costs nothing
/// until the next start-up sweeps it.
pub(super) fn remove_leftover(parents: &Parents, job: &str) {
    if let Err(e) = remove_job(parents, job) {
        tracing::warn!(job = %job, error = %e, "could not remove a job cgroup");
    }
}
