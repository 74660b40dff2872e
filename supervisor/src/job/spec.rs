//! Turning policy plus a request into the job spec a jailer runs.

use prims_policy::Policy;
use prims_protocol::jail::{Bind, CgroupSpec, JobSpec, LimitRequest, NetworkMode};
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

/// Host files of `/etc` that ordinary programs read and that name nothing
/// of the host's own: the alternatives' links (`awk`, `which`, `pager`… are
/// links through `/etc/alternatives` into `/usr` on Debian), and the
/// services and protocols tables (`getservbyname`, `getprotobyname`). One
/// that the host lacks is left out by the jailer.
const ETC_READS: [&str; 3] = ["/etc/alternatives", "/etc/services", "/etc/protocols"];

/// The read-only binds a job needs: the policy's, [`ETC_READS`], and the
/// interpreter's prefix when no bind covers it (pyenv builds must sit at
/// their own path).
pub(crate) fn ro_binds(policy: &Policy, interpreter: &Path) -> Vec<PathBuf> {
    let mut binds = policy.filesystem.ro_binds.clone();
    for etc in ETC_READS.map(Path::new) {
        if !binds.iter().any(|b| etc.starts_with(b)) {
            binds.push(etc.to_path_buf());
        }
    }
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

/// The spec of `job` under `policy`, in `cgroup`; `trust` is the host
/// directory of the bundle that trusts the server's inspection CA.
pub(super) fn build(
    policy: &Policy,
    job: PythonJob,
    cgroup: CgroupSpec,
    trust: Option<&Path>,
) -> JobSpec {
    let network: NetworkMode = policy.network.mode.into();
    let mut ro = ro_binds(policy, &job.interpreter);
    let limits = policy.job_limits(&job.limits);
    let mut binds = Vec::new();
    let (mut env, proxy_port) = if network == NetworkMode::Proxy {
        // The system's roots, for tunnels the proxy does not inspect.
        let ca = PathBuf::from(crate::egress::CA_DIR);
        if ca.is_dir() && !ro.iter().any(|b| ca.starts_with(b)) {
            ro.push(ca);
        }
        // And the server's CA, for those it does.
        let bundle = trust.map(|dir| {
            binds.push(Bind {
                source: dir.to_path_buf(),
                target: PathBuf::from(crate::egress::TRUST_IN_JAIL),
                writable: false,
            });
            crate::egress::Trust::bundle_in_jail()
        });
        (
            crate::egress::run_env(bundle.as_deref()),
            crate::egress::JAIL_PORT,
        )
    } else {
        (Vec::new(), 0)
    };
    // joblib and scikit-learn size `n_jobs=-1` by the cores loky can use,
    // which in a container it reads from the cgroup's CPU quota; the jail
    // shows it no cgroup file, so it is told. (`os.cpu_count()` still says
    // the host's, as in any container.)
    env.push(format!(
        "LOKY_MAX_CPU_COUNT={}",
        limits.cpu_millis.div_ceil(1000).max(1)
    ));
    JobSpec {
        ro_binds: ro,
        limits,
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
        binds,
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
        let mut want = p.filesystem.ro_binds.clone();
        want.extend(ETC_READS.map(PathBuf::from));
        assert_eq!(debian, want);
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
        let spec = build(&Policy::default(), job, cgroup.clone(), None);
        assert_eq!(spec.cpu, prims_protocol::jail::CpuClass::Normal);
        assert_eq!(spec.cgroup, cgroup);
    }
}
