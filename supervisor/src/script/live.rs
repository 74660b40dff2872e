//! `prims run --live`: the script as the one cell of a live interpreter.
//! The jail is built as for a daemon session (the agent on fd 3, the same
//! spec), the script runs as its first cell under the policy's limits, and
//! the jail is killed and reaped before the outcome is returned. What the
//! outcome says is the cell's, as a daemon call reports it.

use crate::interpreters::agent::AgentDir;
use crate::interpreters::cell::{self, CellEnd};
use crate::interpreters::fork::{
    self,
    templates::{Home, Templates},
};
use crate::interpreters::ipython::IpythonLayer;
use crate::interpreters::live::Live;
use crate::interpreters::start::{StartError, StartSpec};
use crate::job::{Jails, PythonJob, RunResult, Sink, Stream};
use prims_policy::Policy;
use prims_protocol::jail::{JobLimits, Outcome, SetupError, Status};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// How long the killed jail's jailer may take to be reaped.
const REAP_WAIT: Duration = Duration::from_secs(10);
/// No environment cache is involved; the key only names the venv.
const ENV_KEY: &str = "prims-run";

/// Why a script could not run in a live interpreter.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("starting the async runtime")]
    Runtime(#[source] std::io::Error),
    #[error("starting the live interpreter")]
    Start(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("starting a fork template: {0}")]
    Template(String),
    /// The jailer could not build the template's jail: reported as a run
    /// whose jail could not be built, as a cold start reports it.
    #[error("the template's jail could not be built: {}", .0.message)]
    NotBuilt(SetupError),
    #[error("the interpreter was not forked from the template (see the log)")]
    NotForked,
    #[error("no fresh python in place of the first: {0}")]
    NotInPlace(String),
    #[error("writing the agent's files")]
    Agent(#[source] std::io::Error),
}

/// Where the script's python comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A cold jail, as with templates off.
    Cold,
    /// Forked from a fork template started for this run.
    Forked,
    /// Forked in place of such a child, in its jail (`fresh: true`).
    InPlace,
}

/// A template for `spec`'s interpreter, up: its workspace is a temporary
/// directory owned by its uid, the one after the script's.
async fn template_for(
    policy: &Policy,
    jails: &Jails,
    spec: &StartSpec,
) -> Result<(Arc<Templates>, tempfile::TempDir), LiveError> {
    let failed = |e: std::io::Error| LiveError::Template(e.to_string());
    let home = tempfile::Builder::new()
        .prefix("prims-template-")
        .tempdir()
        .map_err(failed)?;
    let host_uid = spec.host_uid + 1;
    std::os::unix::fs::chown(home.path(), Some(host_uid), Some(host_uid)).map_err(failed)?;
    let templates = Arc::new(Templates::new(Home::Dir {
        workspace: home.path().to_path_buf(),
        host_uid,
    }));
    templates
        .warm_up(jails, policy, spec)
        .await
        .map_err(|e| match e {
            // What a cold start would report as the outcome.
            StartError::Setup(e) => LiveError::NotBuilt(e),
            e => LiveError::Template(e.to_string()),
        })?;
    Ok((templates, home))
}

/// The agent's files, in a directory that lives as long as the run: the
/// jail's init opens a bind's source as the session's host uid, so every
/// directory on the way is open to all.
fn agent_dir() -> std::io::Result<(AgentDir, tempfile::TempDir)> {
    use std::os::unix::fs::PermissionsExt;
    let home = tempfile::Builder::new().prefix("prims-agent-").tempdir()?;
    std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o755))?;
    Ok((AgentDir::install(home.path())?, home))
}

/// Runs `job` as the one cell of a live interpreter, job `name`.
/// Forked (`origin`), a fork template is started for it first, and the
/// interpreter is its child (or a python forked in place of it) or the run
/// fails.
pub(super) fn run(
    policy: &Policy,
    jails: &Jails,
    name: String,
    job: PythonJob,
    origin: Origin,
    sink: Sink<'_>,
) -> Result<RunResult, LiveError> {
    let forked = origin != Origin::Cold;
    // `prims run` is synchronous; the interpreter's pumps and channel need
    // a runtime only while this one script runs.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(LiveError::Runtime)?;
    let (agent, _agent_home) = agent_dir().map_err(LiveError::Agent)?;
    let spec = StartSpec {
        name,
        interpreter: job.interpreter,
        workspace: job.workspace,
        host_uid: job.host_uid,
        venv: job.venv,
        env_key: ENV_KEY.to_string(),
        lease: None,
        limits: job.limits,
        prewarm: Vec::new(),
        // No environment builds here: only an admin's kernel directory.
        ipython: IpythonLayer::from_policy(policy),
        warm: false,
        batch: false,
        fork: Default::default(),
        agent,
    };
    // A forked run forks whatever the policy's switch says.
    let mut policy = policy.clone();
    policy.interpreters.fork_templates = forked;
    let policy = &policy;
    // Kept until the run ends: dropped, it kills the template's jail.
    let (templates, _home) = if forked {
        let (t, home) = match rt.block_on(template_for(policy, jails, &spec)) {
            Ok(up) => up,
            Err(LiveError::NotBuilt(e)) => return Ok(not_built(e)),
            Err(e) => return Err(e),
        };
        (Some(t), Some(home))
    } else {
        (None, None)
    };
    let started = fork::start(templates.as_ref(), jails, None, policy, spec);
    let mut live = match rt.block_on(started) {
        Ok(live) => live,
        Err(StartError::Setup(e)) => return Ok(not_built(e)),
        Err(e) => return Err(LiveError::Start(Box::new(e))),
    };
    if forked && !live.forked {
        rt.block_on(live.end(REAP_WAIT));
        return Err(LiveError::NotForked);
    }
    if origin == Origin::InPlace {
        if let Err(e) = rt.block_on(live.fresh_in_place()) {
            rt.block_on(live.end(REAP_WAIT));
            return Err(LiveError::NotInPlace(e.to_string()));
        }
    }
    let limits = policy.job_limits(&job.limits);
    let grace = policy.interpreters.interrupt_grace.0;
    let end = rt.block_on(one_cell(&mut live, job.code, &limits, grace, sink));
    // Nothing of the jail outlives the script, background processes
    // included, and its job cgroup goes with it.
    rt.block_on(live.end(REAP_WAIT));
    Ok(result(end))
}

/// Runs `code` as the next cell of `live`, streaming its output to `sink`.
async fn one_cell(
    live: &mut Live,
    code: String,
    limits: &JobLimits,
    grace: Duration,
    sink: Sink<'_>,
) -> CellEnd {
    let (tx, mut rx) = mpsc::unbounded_channel::<(Stream, Vec<u8>)>();
    let never = CancellationToken::new();
    let end = {
        let ends = cell::Ends {
            cancel: &never,
            stop: &never,
        };
        let cell = cell::run(live, code, limits, grace, tx, ends, None);
        tokio::pin!(cell);
        loop {
            tokio::select! {
                end = &mut cell => break end,
                Some((stream, bytes)) = rx.recv() => sink(stream, &bytes),
            }
        }
    };
    while let Ok((stream, bytes)) = rx.try_recv() {
        sink(stream, &bytes);
    }
    end
}

fn result(end: CellEnd) -> RunResult {
    RunResult {
        outcome: end.outcome,
        stdout: end.stdout.bytes,
        stderr: end.stderr.bytes,
        stdout_truncated: end.stdout.truncated,
        stderr_truncated: end.stderr.truncated,
        cancelled: false,
    }
}

/// The jailer could not build the jail: the same outcome a one-shot run
/// reports.
fn not_built(e: SetupError) -> RunResult {
    RunResult {
        outcome: Outcome {
            status: Status::SetupError,
            setup_error: Some(e),
            ..Default::default()
        },
        stdout: Vec::new(),
        stderr: Vec::new(),
        stdout_truncated: false,
        stderr_truncated: false,
        cancelled: false,
    }
}
