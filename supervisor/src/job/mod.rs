//! One jailed job, from a request to an outcome. Every jail the supervisor
//! starts goes through [`Jails`]: runs of the daemon, the install and
//! compile steps of environment builds, and `prims run`
//! ([`crate::script`]).
//! It places the job in a cgroup under the resolved parents, hands the spec
//! to a prims-jailer process, and removes the job cgroup that a jailer
//! killed mid-setup or by a cancel leaves behind.

mod cgroup_parents;
mod jailer;
mod spec;

pub use cgroup_parents::{manager, resolve as resolve_parents, Parents};
pub use jailer::{Cancel, RunError, RunResult, Stream};
pub(crate) use spec::{ro_binds, PythonJob};

use prims_policy::Policy;
use prims_protocol::jail::{CgroupSpec, JobSpec, Status};
use std::os::fd::OwnedFd;
use std::path::PathBuf;

/// What output a run streams as it arrives.
pub type Sink<'a> = &'a (dyn Fn(Stream, &[u8]) + Sync);

/// The jailer binary and the cgroup parents every job of this process runs
/// under; fixed at start-up.
#[derive(Debug, Clone)]
pub struct Jails {
    pub jailer: PathBuf,
    pub parents: Parents,
}

impl Jails {
    /// The cgroup of job `name`.
    pub fn cgroup(&self, name: &str) -> CgroupSpec {
        self.parents.spec_for(name)
    }

    /// Runs `spec`, whose cgroup must come from [`Jails::cgroup`]. A spec in
    /// `NetworkMode::Proxy` takes `proxy`, one end of a Unix socket pair on
    /// which the jail's listener arrives.
    pub fn run(
        &self,
        spec: &JobSpec,
        sink: Sink<'_>,
        cancel: &Cancel,
        proxy: Option<OwnedFd>,
    ) -> Result<RunResult, RunError> {
        let result = jailer::run(&self.jailer, spec, sink, cancel, proxy);
        let killed = match &result {
            Ok(r) => r.outcome.status == Status::SetupError || r.cancelled,
            Err(_) => true,
        };
        if killed {
            // A jailer removes its own cgroup unless it died first.
            if let Err(e) = cgroup_parents::remove_job(&self.parents, &spec.cgroup.job) {
                tracing::warn!(job = %spec.cgroup.job, error = %e, "could not remove a job cgroup");
            }
        }
        result
    }

    /// Runs python `job` as job `name` under `policy`.
    pub(crate) fn run_python(
        &self,
        policy: &Policy,
        name: &str,
        job: PythonJob,
        sink: Sink<'_>,
        cancel: &Cancel,
    ) -> Result<RunResult, RunError> {
        let spec = spec::build(policy, job, self.cgroup(name));
        self.run(&spec, sink, cancel, None)
    }
}
