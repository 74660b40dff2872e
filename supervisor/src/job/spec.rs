//! Turning policy plus a request into the job spec a jailer runs.

use prims_policy::Policy;
use prims_protocol::jail::{CgroupSpec, JobSpec, LimitRequest, NetworkMode};
use std::path::{Path, PathBuf};

/// Python code to run, and where on the host it runs.
#[derive(Debug, Clone)]
pub(crate) struct PythonJob {
    pub code: String,
    pub limits: LimitRequest,
    pub interpreter: PathBuf,
    pub venv: PathBuf,
    pub workspace: PathBuf,
    pub host_uid: u32,
}

/// The read-only binds a job needs: the policy's, plus the interpreter's
/// prefix when no bind covers it (pyenv builds must sit at their own path).
pub(crate) fn ro_binds(policy: &Policy, interpreter: &Path) -> Vec<PathBuf> {
    let mut binds = policy.filesystem.ro_binds.clone();
    let covered = binds.iter().any(|b| interpreter.starts_with(b));
    if !covered {
        if let Some(prefix) = interpreter.parent().and_then(Path::parent) {
            if prefix != Path::new("/") {
                binds.push(prefix.to_path_buf());
            }
        }
    }
    binds
}

/// The spec of `job` under `policy`, in `cgroup`.
pub(super) fn build(policy: &Policy, job: PythonJob, cgroup: CgroupSpec) -> JobSpec {
    let network: NetworkMode = policy.network.mode.into();
    let mut ro = ro_binds(policy, &job.interpreter);
    let (env, proxy_port) = if network == NetworkMode::Proxy {
        // TLS through the proxy is end to end: the jail verifies it.
        let ca = PathBuf::from(crate::egress::CA_DIR);
        if ca.is_dir() && !ro.iter().any(|b| ca.starts_with(b)) {
            ro.push(ca);
        }
        (crate::egress::run_env(), crate::egress::JAIL_PORT)
    } else {
        (Vec::new(), 0)
    };
    JobSpec {
        ro_binds: ro,
        limits: policy.job_limits(&job.limits),
        interpreter: job.interpreter,
        venv: job.venv,
        workspace: job.workspace,
        code: job.code,
        network,
        seccomp_extra_deny: policy.seccomp.extra_deny.clone(),
        socket_families: policy.socket_family_numbers(),
        landlock_required: policy.landlock.required,
        cgroup,
        host_uid: job.host_uid,
        host_gid: job.host_uid,
        argv: Vec::new(),
        env,
        binds: Vec::new(),
        venv_writable: false,
        proxy_port,
        cpu: Default::default(),
        fork: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpreter_prefix_is_bound_only_when_uncovered() {
        let p = Policy::default();
        let debian = ro_binds(&p, Path::new("/usr/bin/python3.11"));
        assert_eq!(debian, p.filesystem.ro_binds);
        let pyenv = ro_binds(&p, Path::new("/opt/py/3.12.1/bin/python3.12"));
        assert_eq!(pyenv.last().unwrap(), Path::new("/opt/py/3.12.1"));
    }

    #[test]
    fn a_python_job_runs_at_normal_cpu_priority() {
        // Only the pool and fresh runs ask for less, on the spec they get
        // here.
        let job = PythonJob {
            code: "print(1)".into(),
            limits: LimitRequest::default(),
            interpreter: "/usr/bin/python3.11".into(),
            venv: "/var/lib/prims/envs/base".into(),
            workspace: "/var/lib/prims/sessions/s1".into(),
            host_uid: 100_000,
        };
        let cgroup = CgroupSpec {
            backend: prims_protocol::jail::CgroupBackend::None,
            parents: Default::default(),
            job: "job-1".into(),
        };
        let spec = build(&Policy::default(), job, cgroup.clone());
        assert_eq!(spec.cpu, prims_protocol::jail::CpuClass::Normal);
        assert_eq!(spec.cgroup, cgroup);
    }
}
