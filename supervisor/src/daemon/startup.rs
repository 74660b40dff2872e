//! Bringing the daemon up: state directory, cgroups (and their crash
//! leftovers), sessions, environments, the sweeper, then the socket.

use super::ready::{self, Readiness};
use super::scheduler::Scheduler;
use super::state::Daemon;
use crate::audit::Audit;
use crate::envs::{EnvConfig, Envs};
use crate::interpreters::agent::AgentDir;
use crate::interpreters::Interpreters;
use crate::job::{self, InstanceId, Jails, JobNames, Parents};
use crate::server::{self, ConnectionLimits, ServerConfig};
use crate::sessions::{SessionPolicy, SessionStore};
use prims_policy::Policy;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};
use tokio_util::sync::CancellationToken;

/// On cgroup v2 the daemon moves itself into this leaf of its delegated
/// cgroup, whose other children are the job cgroups.
pub const SUPERVISOR_LEAF: &str = "supervisor";

pub struct DaemonConfig {
    pub policy: Policy,
    /// The file `policy` came from; SIGHUP re-reads it.
    pub policy_path: Option<PathBuf>,
    pub state_dir: PathBuf,
    pub socket: PathBuf,
    pub jailer: PathBuf,
    /// Peers other than root that may use the socket (the front-end's uid).
    pub allowed_uids: Vec<u32>,
    pub socket_group: Option<u32>,
    /// The egress proxy process (started on first use) every proxied jail
    /// reaches the network through: environment builds and allowlist runs.
    pub egress: Arc<crate::egress::EgressProxy>,
    /// In a cluster, this node's id: every new session id begins with it.
    pub node: Option<prims_protocol::node::NodeId>,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("state directory {path}: {source}")]
    StateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("filesystem.default_interpreter {0:?} is not in filesystem.interpreters")]
    NoInterpreter(String),
    #[error("cgroups: {0}")]
    Cgroup(#[from] prims_cgroup::CgroupError),
    #[error("the instance id of the state directory: {0}")]
    Instance(#[from] job::InstanceError),
    #[error("sessions: {0}")]
    Sessions(String),
    #[error("environments: {0}")]
    Envs(String),
    #[error("the agent's files: {0}")]
    Agent(String),
    #[error("socket: {0}")]
    Server(String),
    #[error("TLS inspection and secrets: {0}")]
    Egress(String),
}

/// The uid that environment builds run as: the last of the identity range,
/// which sessions never get.
pub(super) fn build_uid(policy: &Policy) -> u32 {
    policy.identity.uid_base + policy.identity.uid_count - 1
}

/// Resolves the cgroup parents and removes what an earlier start of this
/// instance left there; other supervisors sharing the parent keep theirs.
fn prepare_cgroups(policy: &Policy, instance: &InstanceId) -> Result<Parents, StartError> {
    if policy.cgroup.backend != prims_protocol::jail::CgroupBackend::None
        && matches!(prims_cgroup::detect(), Ok(prims_cgroup::Version::V2))
    {
        // The no-internal-processes rule: leave our own cgroup to its children.
        prims_cgroup::v2_move_self_to_leaf(SUPERVISOR_LEAF)?;
    }
    let parents = job::resolve_parents(policy)?;
    job::sweep_leftovers(&parents, instance);
    Ok(parents)
}

pub async fn start(cfg: DaemonConfig, shutdown: CancellationToken) -> Result<(), StartError> {
    let policy = cfg.policy;
    let dir_err = |source| StartError::StateDir {
        path: cfg.state_dir.clone(),
        source,
    };
    std::fs::create_dir_all(&cfg.state_dir).map_err(dir_err)?;
    // Others may traverse (the jail's uids reach their workspaces) but not list.
    std::fs::set_permissions(&cfg.state_dir, std::fs::Permissions::from_mode(0o711))
        .map_err(dir_err)?;
    let (version, interpreter) = policy
        .default_interpreter()
        .map(|(v, p)| (v.to_string(), p.to_path_buf()))
        .ok_or_else(|| StartError::NoInterpreter(policy.filesystem.default_interpreter.clone()))?;
    // The CA is made at first start; the proxy gets it, the admin's roots
    // and every secret's value before it serves a jail.
    let trust = crate::egress::Trust::prepare(&cfg.state_dir).map_err(StartError::Egress)?;
    let configure = trust.configure(&policy).map_err(StartError::Egress)?;
    cfg.egress
        .configure(configure)
        .await
        .map_err(|e| StartError::Egress(e.to_string()))?;
    let instance = InstanceId::of_state_dir(&cfg.state_dir)?;
    tracing::info!(%instance, "job cgroups of this supervisor are named job-{instance}-…");
    let jails = Jails {
        jailer: cfg.jailer,
        parents: prepare_cgroups(&policy, &instance)?,
        names: JobNames::of_instance(&instance),
        trust: Some(trust.dir.clone()),
    };
    // Before anything of ours forks (environment builds do).
    let agent = AgentDir::mount(&cfg.state_dir.join("agent"))
        .map_err(|e| StartError::Agent(e.to_string()))?;
    let sessions = SessionStore::open(&cfg.state_dir, &SessionPolicy::from(&policy))
        .map_err(|e| StartError::Sessions(e.to_string()))?
        .with_node(cfg.node);
    let sessions = Arc::new(sessions);
    let checkpoints = crate::checkpoints::Checkpoints::open(&cfg.state_dir)
        .map_err(|e| StartError::Sessions(format!("the checkpoints: {e}")))?;
    // Those of sessions that ended while the supervisor was down go.
    checkpoints.sweep(&|name| sessions.has(name));
    let checkpoints = Arc::new(checkpoints);
    let audit = Arc::new(Audit::new(&cfg.state_dir));
    let envs = Envs::new(
        EnvConfig {
            state_dir: cfg.state_dir.clone(),
            jails: jails.clone(),
            interpreter: interpreter.clone(),
            version,
            build_uid: build_uid(&policy),
            audit: Some(audit.clone()),
            egress: cfg.egress.clone(),
        },
        &policy,
    )
    .map_err(|e| StartError::Envs(e.to_string()))?;
    let envs = Arc::new(envs);
    envs.spawn_base_build();
    let concurrency = (
        policy.max_concurrent_runs(),
        policy.max_concurrent_fresh_runs(),
    );
    let stopping = CancellationToken::new();
    let interpreters = Arc::new(Interpreters::new(
        jails,
        cfg.egress.clone(),
        interpreter,
        sessions.clone(),
        agent.clone(),
        stopping.clone(),
    ));
    let task_limits = crate::tasks::TaskLimits::from(&policy.tasks);
    let readiness = Readiness::new();
    let daemon = Arc::new(Daemon {
        readiness: readiness.clone(),
        scheduler: Scheduler::new(concurrency.0, concurrency.1, policy.limits.max_queued_runs),
        policy: RwLock::new(Arc::new(policy)),
        sessions,
        envs,
        interpreters: interpreters.clone(),
        audit,
        tasks: crate::tasks::Tasks::new(task_limits, shutdown.child_token()),
        checkpoints,
        egress_allowed: Default::default(),
        egress_denied: Default::default(),
        draining: Default::default(),
        stopping,
        runs_in_flight: Default::default(),
    });
    {
        let d = daemon.clone();
        tokio::spawn(interpreters.clone().keep_pool(
            daemon.envs.clone(),
            daemon.sessions.clone(),
            move || d.policy(),
            shutdown.clone(),
        ));
    }
    tokio::spawn(ready::bring_up(
        readiness,
        daemon.envs.clone(),
        interpreters.clone(),
        daemon.policy(),
    ));
    tokio::spawn(sweeper(daemon.clone(), shutdown.clone()));
    {
        let d = daemon.clone();
        tokio::spawn(
            interpreters
                .clone()
                .keep_saved(move || d.policy(), shutdown.clone()),
        );
    }
    tokio::spawn(reload_on_hangup(
        daemon.clone(),
        (trust, cfg.egress.clone()),
        cfg.policy_path.clone(),
        shutdown.clone(),
    ));
    tracing::info!(socket = %cfg.socket.display(), "supervisor listening; ready once the default environment and its template are up");
    // The socket closes only once the running calls have their answers.
    let close = CancellationToken::new();
    let served = server::serve(
        ServerConfig {
            socket: cfg.socket,
            allowed_uids: cfg.allowed_uids,
            socket_group: cfg.socket_group,
            limits: ConnectionLimits::default(),
        },
        Arc::new(daemon.clone()),
        close.clone(),
    );
    tokio::pin!(served);
    let served = tokio::select! {
        // It could not listen, say: nothing ran.
        served = &mut served => served,
        _ = shutdown.cancelled() => {
            tracing::info!("stopping: running calls are interrupted and answered, then every session's variables saved");
            daemon.stop_calls().await;
            close.cancel();
            served.await
        }
    }
    .map_err(|e| StartError::Server(e.to_string()));
    // Live sessions keep their globals across the restart (a kill -9
    // does not give them this chance).
    let save = daemon.policy().interpreters.save_timeout.0;
    interpreters.save_all(save).await;
    // No jail outlives the supervisor that started it.
    let sessions = daemon.sessions.clone();
    let _ = tokio::task::spawn_blocking(move || interpreters.shutdown(&sessions)).await;
    agent.unmount();
    // Last, once no template is left: the host-wide sysctls a template
    // raised go back to what they were, where nothing else changed them.
    crate::interpreters::fork::budgets::restore(&cfg.state_dir);
    served
}

/// `systemctl reload` sends SIGHUP: re-read the policy file. An invalid
/// file is refused with the errors `prims policy check` prints, and the
/// policy in force stays.
async fn reload_on_hangup(
    d: Arc<Daemon>,
    (trust, egress): (crate::egress::Trust, Arc<crate::egress::EgressProxy>),
    path: Option<PathBuf>,
    shutdown: CancellationToken,
) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        tracing::error!("cannot listen for SIGHUP; policy reload is off");
        return;
    };
    loop {
        tokio::select! {
            _ = hup.recv() => {}
            _ = shutdown.cancelled() => return,
        }
        let Some(p) = path.clone() else {
            tracing::warn!(
                "SIGHUP: running on built-in defaults; there is no policy file to reload"
            );
            continue;
        };
        match tokio::task::spawn_blocking(move || Policy::load(&p)).await {
            Ok(Ok(policy)) => match trust.configure(&policy) {
                // New values take effect for every session's next request.
                Ok(configure) => match egress.configure(configure).await {
                    Ok(()) => d.reload(policy),
                    Err(e) => tracing::error!(
                        "policy reload refused, the old policy stays in force: the egress proxy: {e}"
                    ),
                },
                Err(e) => tracing::error!(
                    "policy reload refused, the old policy stays in force: {e}"
                ),
            },
            Ok(Err(e)) => {
                tracing::error!("policy reload refused, the old policy stays in force:\n{e}")
            }
            Err(e) => tracing::error!(error = %e, "policy reload failed"),
        }
    }
}

/// Ends idle sessions and collects unused environments, at least once a
/// minute and often enough that a session outlives its TTL by at most half.
async fn sweeper(d: Arc<Daemon>, shutdown: CancellationToken) {
    let ttl = {
        let p = d.policy();
        p.sessions.idle_ttl.0.min(p.interpreters.idle_ttl.0)
    };
    let every = (ttl / 2).clamp(Duration::from_secs(1), Duration::from_secs(60));
    let mut tick = tokio::time::interval(every);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.cancelled() => return,
        }
        let p = d.policy();
        // An interpreter never outlives its session's idle time.
        let ttl = p.interpreters.idle_ttl.0.min(p.sessions.idle_ttl.0);
        d.interpreters.stop_idle(ttl, p.interpreters.save_timeout.0);
        let (sessions, envs, live) = (d.sessions.clone(), d.envs.clone(), d.interpreters.clone());
        let checkpoints = d.checkpoints.clone();
        let swept = tokio::task::spawn_blocking(move || {
            // The sweep removes each workspace once its jail has ended.
            let gone = sessions.sweep(SystemTime::now(), &|name| {
                if let Some(end) = live.forget(name) {
                    let _ = end.blocking_recv();
                }
                checkpoints.remove_session(name);
            });
            let _ = envs.gc();
            gone
        })
        .await
        .unwrap_or_default();
        for name in swept {
            tracing::info!(session = %name, "session expired");
        }
    }
}
