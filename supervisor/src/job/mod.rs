//! One jailed job, from a request to an outcome. Every jail the supervisor
//! starts goes through [`Jails`]: runs of the daemon, the install and
//! compile steps of environment builds, `prims run` ([`crate::script`]),
//! and live interpreters, whose jails outlive the call that starts them
//! ([`Jails::spawn`]).
//! It places the job in a cgroup under the resolved parents, named by
//! [`JobNames`] after the supervisor instance that owns it, hands the spec
//! to a prims-jailer process, and removes the job cgroup that a jailer
//! killed mid-setup or by a cancel leaves behind; `sweep_leftovers`
//! removes those an earlier start of the same instance left.

mod cgroup_parents;
mod error;
mod instance;
mod jailer;
mod jailer_end;
mod launch;
mod leftovers;
mod names;
mod python_pid;
mod spawned;
mod spec;

pub use cgroup_parents::{manager, resolve as resolve_parents, Parents};
pub use error::RunError;
pub use instance::{InstanceError, InstanceId};
pub use jailer::{Cancel, RunResult, Stream};
pub(crate) use leftovers::sweep as sweep_leftovers;
pub use names::JobNames;
pub use python_pid::{
    python_pidfd, python_process, python_process_in, python_process_of, send_sigint, Layout,
    PythonPidError, PythonProcess,
};
pub use spawned::{JailKiller, Spawned};
pub(crate) use spec::{ro_binds, PythonJob};

use prims_policy::Policy;
use prims_protocol::jail::{CgroupSpec, JobSpec, Status};
use std::os::fd::OwnedFd;
use std::path::PathBuf;

/// What output a run streams as it arrives.
pub type Sink<'a> = &'a (dyn Fn(Stream, &[u8]) + Sync);

/// The jailer binary, the cgroup parents every job of this process runs
/// under, and the names its jobs get there; fixed at start-up.
#[derive(Debug, Clone)]
pub struct Jails {
    pub jailer: PathBuf,
    pub parents: Parents,
    pub names: JobNames,
    /// The host directory of the bundle proxied jails trust TLS with (the
    /// server's inspection CA); `None` outside a server.
    pub trust: Option<PathBuf>,
}

impl Jails {
    /// The cgroup of job `name`, a name made by [`Jails::names`] (so that
    /// the start-up sweep knows whose it is).
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
            cgroup_parents::remove_leftover(&self.parents, &spec.cgroup.job);
        }
        result
    }

    /// Starts `spec`, whose cgroup must come from [`Jails::cgroup`], with
    /// `channel` (one end of a Unix socket pair) as python's fd 3, and
    /// returns at once. The caller owns the jail's life: see [`Spawned`].
    /// No watchdog guards it; the jailer still ends it at the spec's wall
    /// and CPU time, which thus cap its whole life, and the caller, who
    /// reads python's pipes, applies any output cap.
    pub fn spawn(
        &self,
        spec: &JobSpec,
        channel: OwnedFd,
        proxy: Option<OwnedFd>,
        adopt: Option<OwnedFd>,
    ) -> Result<Spawned, RunError> {
        let launched = launch::launch(&self.jailer, spec, proxy, Some(channel), adopt)?;
        Ok(Spawned::new(
            launched,
            self.parents.clone(),
            spec.cgroup.job.clone(),
        ))
    }

    /// The spec of python `job` as job `name` under `policy`, for
    /// [`Jails::run`] or [`Jails::spawn`].
    pub(crate) fn python_spec(&self, policy: &Policy, name: &str, job: PythonJob) -> JobSpec {
        spec::build(policy, job, self.cgroup(name), self.trust.as_deref())
    }

    /// Runs python `job` as job `name` under `policy` (`prims run`).
    pub(crate) fn run_python(
        &self,
        policy: &Policy,
        name: &str,
        job: PythonJob,
        sink: Sink<'_>,
        cancel: &Cancel,
    ) -> Result<RunResult, RunError> {
        self.run(&self.python_spec(policy, name, job), sink, cancel, None)
    }
}
