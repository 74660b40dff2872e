//! At start-up, after a crash: the job cgroups an earlier start of this
//! instance left under the parent are removed, with whatever still runs
//! in them. Other instances' jobs on the same parent are left alone. So
//! are an earlier version's, whose names do not say whose they are: they
//! may be a running supervisor's, so they are only logged, with their
//! paths, for the operator to remove once nothing runs in them.

use super::cgroup_parents::{manager, Parents};
use super::instance::InstanceId;
use super::names::{owner, Owner};
use prims_protocol::jail::CgroupBackend;
use std::collections::BTreeSet;
use std::path::PathBuf;

/// Removes this instance's leftover job cgroups under `parents`.
pub fn sweep(parents: &Parents, me: &InstanceId) {
    if parents.backend == CgroupBackend::None {
        return;
    }
    let manager = match manager(parents) {
        Ok(m) => m,
        Err(e) => {
            tracing::warn!(error = %e, "cannot look for job cgroups left by an earlier start");
            return;
        }
    };
    let jobs = match manager.list_jobs() {
        Ok(jobs) => jobs,
        Err(e) => {
            tracing::warn!(error = %e, "cannot list the job cgroups under the parent");
            return;
        }
    };
    for job in jobs {
        match owner(me, &job) {
            Owner::This => {
                tracing::warn!(job, "removing a job cgroup left by an earlier start");
                if let Err(e) = manager.remove_job(&job) {
                    tracing::error!(job, error = %e, "could not remove a stale job cgroup");
                }
            }
            Owner::Other(instance) => {
                tracing::debug!(job, %instance, "another supervisor's job cgroup: left alone");
            }
            Owner::Unknown => tracing::warn!(
                job,
                paths = %paths(parents, &job),
                "a job cgroup named by an earlier version, perhaps another running \
                 supervisor's, is left alone: once its cgroup.procs is empty, rmdir it"
            ),
            Owner::NotAJob => {}
        }
    }
}

/// Where job `job` is, in every hierarchy that has it.
fn paths(parents: &Parents, job: &str) -> String {
    let dirs: BTreeSet<PathBuf> = parents
        .dirs
        .values()
        .map(|d| d.join(job))
        .filter(|d| d.is_dir())
        .collect();
    dirs.iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
