//! Starting an interpreter: the jail of a session's workspace running the
//! agent, up to the agent's `ready`.

use super::agent::{
    AgentDir, ALLOCATOR_ENV, BLAS_THREADS, PREWARM_ENV, SESSION_SITE, SITE_ENV, TEMPLATE_ENV,
};
use super::channel::{self, ChannelError, FromAgent, Incoming, Named};
use super::enforced::enforced;
use super::ipython::IpythonLayer;
use super::live::Live;
use super::pumps::Pump;
use super::settled::MainThread;
use crate::egress::{Attached, EgressProxy};
use crate::envs::EnvLease;
use crate::job::{Jails, PythonJob, PythonProcess, Spawned, Stream};
use prims_cgroup::{CpuPriority, JobCgroup};
use prims_policy::Policy;
use prims_protocol::jail::{
    CgroupBackend, CpuClass, ForkRole, JobSpec, LimitRequest, NetworkMode, Outcome, SetupError,
};
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// How long an agent may take to start and import `python.prewarm_imports`
/// (a cold pandas import on a busy host, at idle priority for the pool).
const READY_DEADLINE: Duration = Duration::from_secs(120);
/// How long a jail whose agent closed its channel before `ready` may take
/// to report why.
const SETUP_REPORT_WAIT: Duration = Duration::from_secs(5);
/// An interpreter's jail ends after this long whatever happens; the
/// supervisor enforces each call's own limits.
const LIFETIME_MS: u64 = 24 * 3600 * 1000;
/// A template's jail outlives its python by its last child's lifetime.
const TEMPLATE_LIFETIME_MS: u64 = 3 * LIFETIME_MS;

/// Where and how to start one interpreter.
pub(crate) struct StartSpec {
    pub name: String,
    pub interpreter: PathBuf,
    pub workspace: PathBuf,
    pub host_uid: u32,
    /// The environment's venv, and the lease that keeps it from being
    /// collected while the interpreter lives (none for `prims run`).
    pub venv: PathBuf,
    pub env_key: String,
    pub lease: Option<EnvLease>,
    /// The limits of the call that starts it (memory and pids hold for its
    /// life; time limits are per call).
    pub limits: LimitRequest,
    /// For the pool: import these first, at idle CPU priority.
    pub prewarm: Vec<String>,
    /// The IPython layer, if there is one: cells then run through IPython.
    pub ipython: Option<IpythonLayer>,
    pub warm: bool,
    /// For a `fresh: true` call: batch CPU weight until a call of the
    /// session's own uses it (see the scheduler).
    pub batch: bool,
    /// A template itself, or a cold jail.
    pub fork: ForkRole,
    /// The agent's files, which python runs.
    pub agent: AgentDir,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum StartError {
    #[error("creating the interpreter's channel: {0}")]
    Channel(#[source] std::io::Error),
    #[error("starting the jail: {0}")]
    Spawn(String),
    #[error("the interpreter did not start: {0}")]
    NotReady(String),
    #[error("network.mode = \"allowlist\" needs the supervisor's egress proxy, which `prims run` does not start; run the code through the daemon")]
    NoEgress,
    /// The jailer could not build the jail; nothing ran.
    #[error("the interpreter did not start: {0}")]
    Setup(SetupError),
}

/// Starts an interpreter cold and waits for its agent's `ready`. Prewarm
/// imports that fail are logged; the interpreter still serves. (A start
/// that may fork from a template goes through `fork::start`.)
pub(crate) async fn start(
    jails: &Jails,
    egress: Option<&Arc<EgressProxy>>,
    policy: &Policy,
    s: StartSpec,
) -> Result<Live, StartError> {
    let t0 = Instant::now();
    let spec = agent_spec(jails, policy, &s);
    let l = launch(jails, egress, &spec, &s, None, t0).await?;
    Ok(l.into_live(s, &spec))
}

/// A started jail, before it becomes a [`Live`].
pub(super) struct Launched {
    kill: crate::job::JailKiller,
    writer: super::channel::AgentWriter,
    channel_ino: u64,
    up: Up,
}

impl Launched {
    /// python's `/proc/<pid>`.
    pub(super) fn python_dir(&self) -> std::os::fd::BorrowedFd<'_> {
        self.up.python.proc_dir.as_fd()
    }

    pub(super) fn into_live(self, s: StartSpec, spec: &JobSpec) -> Live {
        let up = self.up;
        Live {
            held: (&spec.limits).into(),
            asked: s.limits,
            env_key: s.env_key,
            _lease: s.lease,
            _ipython: s.ipython,
            kill: self.kill,
            exit: up.exit,
            writer: self.writer,
            rx: up.rx,
            stdout: up.stdout,
            stderr: up.stderr,
            python: up.python.pidfd,
            main: MainThread::new(up.python.proc_dir, self.channel_ino),
            enforced: enforced(spec, up.cgroup.is_some()),
            cgroup: up.cgroup,
            cells: 0,
            secret_env: Vec::new(),
            warm: s.warm,
            batch: s.batch,
            forked: false,
            parent: None,
            job: s.name,
            egress: up.egress,
        }
    }
}

/// Starts the jail of `spec` (adopting a template's child on the socket
/// `adopt`, when `spec` is for one) and waits for its agent's `ready`.
pub(super) async fn launch(
    jails: &Jails,
    egress: Option<&Arc<EgressProxy>>,
    spec: &JobSpec,
    s: &StartSpec,
    adopt: Option<OwnedFd>,
    t0: Instant,
) -> Result<Launched, StartError> {
    let (writer, rx, theirs) = channel::pair().map_err(StartError::Channel)?;
    let channel_ino = inode(&theirs).map_err(StartError::Channel)?;
    let (proxy, proxy_theirs) = proxy_ends(spec, egress)?;
    let spawned = spawn(jails, spec, theirs, proxy_theirs, adopt).await?;
    let kill = spawned.killer();
    // The jail runs from here on: a start that fails kills it.
    let layout = match spec.fork {
        ForkRole::None => crate::job::Layout::Nested,
        ForkRole::Template { .. } => crate::job::Layout::Shallow,
        ForkRole::Child { template_python } => crate::job::Layout::Adopted {
            template: template_python as libc::pid_t,
        },
    };
    let up = match come_up(jails, s, layout, spawned, rx, proxy, t0).await {
        Ok(up) => up,
        Err(e) => {
            kill.kill();
            return Err(e);
        }
    };
    Ok(Launched {
        kill,
        writer,
        channel_ino,
        up,
    })
}

/// The agent's job: a run's spec, living as long as the interpreter may,
/// at idle CPU priority for the pool.
pub(super) fn agent_spec(jails: &Jails, policy: &Policy, s: &StartSpec) -> JobSpec {
    let mut spec = jails.python_spec(
        policy,
        &s.name,
        PythonJob {
            code: String::new(),
            limits: s.limits,
            interpreter: s.interpreter.clone(),
            venv: s.venv.clone(),
            workspace: s.workspace.clone(),
            host_uid: s.host_uid,
        },
    );
    spec.limits.wall_time_ms = LIFETIME_MS;
    spec.limits.cpu_time_ms = LIFETIME_MS;
    let template = matches!(s.fork, ForkRole::Template { .. });
    // A template's python honours its environment (below): not `-I`.
    s.agent.apply(
        &mut spec,
        if template {
            &["-s", "-u"]
        } else {
            &["-I", "-u"]
        },
    );
    spec.cpu = match (s.warm, s.batch) {
        (true, _) => CpuClass::Idle,
        (false, true) => CpuClass::Batch,
        (false, false) => CpuClass::Normal,
    };
    if template {
        // Its jail stays while any child lives, however old the template.
        spec.limits.wall_time_ms = TEMPLATE_LIFETIME_MS;
        spec.limits.cpu_time_ms = TEMPLATE_LIFETIME_MS;
        spec.limits.memory_bytes = policy.interpreters.template_memory.0;
        spec.env.push(format!("{TEMPLATE_ENV}=1"));
        // A thread does not survive a fork: BLAS pools stay single-threaded
        // in the template, and so in its children.
        for var in BLAS_THREADS {
            spec.env.push(format!("{var}=1"));
        }
        // Its objects live in malloc's heap, not in pymalloc's 1 MiB arenas,
        // so that it can back them with 2 MiB pages (fork/template.py
        // `_huge_pages`), whose page-table entries a fork copies, and an
        // exit unmaps, in batches. The environment is the spec's alone, and
        // the agent drops the variable before anything else.
        spec.env.push(format!("{ALLOCATOR_ENV}=malloc"));
        // A template needs no way out: each child makes a network
        // namespace of its own, with its own listener in allowlist mode.
        // What a child's python has of allowlist mode, the proxy's
        // variables and its CA, it has from the template, which keeps them.
        spec.network = NetworkMode::None;
        spec.fork = s.fork;
    }
    if !s.prewarm.is_empty() {
        spec.env
            .push(format!("{PREWARM_ENV}={}", s.prewarm.join(",")));
    }
    // `pip install --target` the session's own site directory (the
    // environment is read-only) is importable from the next cell on. The
    // agent drops this variable before any user code runs.
    spec.env.push(format!("{SITE_ENV}={SESSION_SITE}"));
    if let Some(k) = &s.ipython {
        k.apply(&mut spec);
    }
    spec
}

/// The proxy that will serve a proxied jail's listener, with our end of the
/// socket pair the listener arrives on.
type ProxyEnd = (Arc<EgressProxy>, OwnedFd);

/// Our end of that pair, and the jail's; neither without a network.
fn proxy_ends(
    spec: &JobSpec,
    egress: Option<&Arc<EgressProxy>>,
) -> Result<(Option<ProxyEnd>, Option<OwnedFd>), StartError> {
    if spec.network != NetworkMode::Proxy {
        return Ok((None, None));
    }
    let egress = egress.ok_or(StartError::NoEgress)?;
    let (a, b) = std::os::unix::net::UnixStream::pair().map_err(StartError::Channel)?;
    Ok((
        Some((egress.clone(), OwnedFd::from(a))),
        Some(OwnedFd::from(b)),
    ))
}

/// Starts the jail, with `channel` as python's fd 3.
async fn spawn(
    jails: &Jails,
    spec: &JobSpec,
    channel: OwnedFd,
    proxy: Option<OwnedFd>,
    adopt: Option<OwnedFd>,
) -> Result<Spawned, StartError> {
    let (jails, spec) = (jails.clone(), spec.clone());
    tokio::task::spawn_blocking(move || jails.spawn(&spec, channel, proxy, adopt))
        .await
        .map_err(|e| StartError::Spawn(e.to_string()))?
        .map_err(|e| StartError::Spawn(e.to_string()))
}

/// What a jail that came up hands to its `Live`.
struct Up {
    exit: oneshot::Receiver<Outcome>,
    rx: Incoming,
    stdout: Pump,
    stderr: Pump,
    python: PythonProcess,
    cgroup: Option<Box<dyn JobCgroup>>,
    egress: Option<Attached>,
}

/// From a spawned jail to a ready interpreter: its output pumped, its end
/// watched, the agent's `ready`, python and the job cgroup held, and its
/// listener handed to the egress proxy. The caller kills the jail when
/// this fails.
async fn come_up(
    jails: &Jails,
    s: &StartSpec,
    layout: crate::job::Layout,
    spawned: Spawned,
    mut rx: Incoming,
    proxy: Option<ProxyEnd>,
    t0: Instant,
) -> Result<Up, StartError> {
    let jailer_pid = spawned.pid();
    let (pumps, mut exit) = watch(spawned);
    let (stdout, stderr) =
        pumps.map_err(|e| StartError::Spawn(format!("reading the jail's output: {e}")))?;
    let template = matches!(s.fork, ForkRole::Template { .. });
    wait_ready(&mut rx, &mut exit, &s.name, template, t0, READY_DEADLINE).await?;
    let python = crate::job::python_process_in(jailer_pid, layout)
        .map_err(|e| StartError::NotReady(format!("finding the jail's python: {e}")))?;
    let cgroup = open_cgroup(jails, &s.name)
        .map_err(|e| StartError::NotReady(format!("opening the job cgroup: {e}")))?;
    // The init handed its listener over before python started.
    let egress = match proxy {
        None => None,
        Some((proxy, ours)) => Some(
            attach(&proxy, ours)
                .await
                .map_err(|e| StartError::NotReady(format!("the egress proxy: {e}")))?,
        ),
    };
    Ok(Up {
        exit,
        rx,
        stdout,
        stderr,
        python,
        cgroup,
        egress,
    })
}

/// The pumps of the jail's stdout and stderr, and its outcome once the
/// jailer exits (a thread of its own waits for that, pumps or not).
fn watch(mut spawned: Spawned) -> (std::io::Result<(Pump, Pump)>, oneshot::Receiver<Outcome>) {
    let pumps = (|| {
        let out = spawned
            .take_stdout()
            .ok_or_else(|| std::io::Error::other("no stdout"))?;
        let err = spawned
            .take_stderr()
            .ok_or_else(|| std::io::Error::other("no stderr"))?;
        Ok::<_, std::io::Error>((
            Pump::start(Stream::Stdout, out)?,
            Pump::start(Stream::Stderr, err)?,
        ))
    })();
    let (exit_tx, exit) = oneshot::channel();
    tokio::task::spawn_blocking(move || {
        let _ = exit_tx.send(spawned.wait());
    });
    (pumps, exit)
}

/// Waits for the agent's `ready`, or for the jail to end first, and says
/// why it did not come.
pub(super) async fn wait_ready(
    rx: &mut Incoming,
    exit: &mut oneshot::Receiver<Outcome>,
    job: &str,
    template: bool,
    t0: Instant,
    within: Duration,
) -> Result<(), StartError> {
    let ready = tokio::select! {
        m = tokio::time::timeout(within, rx.recv()) => m,
        o = &mut *exit => return Err(jail_ended(o)),
    };
    let not_ready = |why: String| Err(StartError::NotReady(why));
    match ready {
        Err(_) => not_ready(format!("no ready within {} s", within.as_secs())),
        Ok(None) | Ok(Some(Err(ChannelError::Closed))) => {
            // The channel closes as the jailer gives up building the jail,
            // just before it reports why: that reason is the one to give.
            match tokio::time::timeout(SETUP_REPORT_WAIT, exit).await {
                Ok(o) => Err(jail_ended(o)),
                Err(_) => not_ready("the agent ended before it was ready".into()),
            }
        }
        Ok(Some(Err(e))) => not_ready(format!("the agent's channel: {e}")),
        Ok(Some(Ok(FromAgent::Ready {
            python,
            imported,
            failed,
            import_ms,
            ipython,
            ipython_error,
        }))) => {
            log_failed_imports(job, &failed, template);
            if let Some(why) = ipython_error {
                tracing::warn!(job = %job, why, "IPython did not start from the IPython layer; cells run without notebook semantics");
            }
            tracing::debug!(job = %job, python, ?ipython, ?imported, import_ms, ms = t0.elapsed().as_millis() as u64, "interpreter ready");
            Ok(())
        }
        Ok(Some(Ok(_))) => not_ready("the agent's first message was not ready".into()),
    }
}

/// Hands the jail's listener, which arrives on `ours`, to the proxy.
async fn attach(proxy: &Arc<EgressProxy>, ours: OwnedFd) -> Result<Attached, String> {
    let listener = tokio::time::timeout(SETUP_REPORT_WAIT, crate::egress::receive_listener(ours))
        .await
        .map_err(|_| "the jail sent no listener".to_string())?
        .map_err(|e| e.to_string())?;
    proxy.attach(listener).await.map_err(|e| e.to_string())
}

/// The inode of the socket `fd`, as `/proc/<pid>/fd` names it.
pub(super) fn inode(fd: &OwnedFd) -> std::io::Result<u64> {
    use std::os::unix::fs::MetadataExt;
    let dup = fd.try_clone()?;
    Ok(std::fs::File::from(dup).metadata()?.ino())
}

/// Why a jail that ended before its agent was ready did not start.
fn jail_ended(o: Result<Outcome, oneshot::error::RecvError>) -> StartError {
    match o {
        Ok(Outcome {
            setup_error: Some(e),
            ..
        }) => StartError::Setup(e),
        Ok(o) => StartError::NotReady(format!("the jail ended ({:?})", o.status)),
        Err(_) => StartError::NotReady("the jailer vanished".to_string()),
    }
}

/// A template's are noted once, quietly: its children say nothing of them,
/// and a one-shot `prims run --forked` keeps its stderr the script's.
fn log_failed_imports(job: &str, failed: &[Named], template: bool) {
    for f in failed {
        if template {
            tracing::info!(job, module = %f.name, why = %f.why, "a template's prewarm import failed");
        } else {
            tracing::warn!(job, module = %f.name, why = %f.why, "a prewarm import failed");
        }
    }
}

fn open_cgroup(
    jails: &Jails,
    name: &str,
) -> Result<Option<Box<dyn prims_cgroup::JobCgroup>>, prims_cgroup::CgroupError> {
    if jails.parents.backend == CgroupBackend::None {
        return Ok(None);
    }
    let cg = crate::job::manager(&jails.parents)?.open_job(name)?;
    Ok(Some(cg))
}

/// A claimed pool interpreter, a ready template, or a fresh run's
/// interpreter that goes on to serve the session, competes for CPU like any
/// run from now on.
pub(super) fn promote(live: &mut Live) {
    live.batch = false;
    if let Some(cg) = &live.cgroup {
        if let Err(e) = cg.set_cpu_priority(CpuPriority::Normal) {
            tracing::warn!(job = %live.job, error = %e, "could not raise a claimed interpreter's CPU priority");
        }
    }
}

/// An interpreter replaced in place for a `fresh: true` call runs at batch
/// CPU weight again, as a new one for that call would.
pub(super) fn demote(live: &mut Live) {
    if live.batch {
        return;
    }
    live.batch = true;
    if let Some(cg) = &live.cgroup {
        if let Err(e) = cg.set_cpu_priority(CpuPriority::Batch) {
            tracing::warn!(job = %live.job, error = %e, "could not lower a fresh interpreter's CPU priority");
        }
    }
}
