//! One script in a jail without the daemon (`prims run`): the policy's
//! default interpreter on an empty venv, a workspace of the caller's or a
//! temporary one, and a job cgroup of its own. The script runs as python's
//! main program, or (`live`) as the one cell of a live interpreter, the way
//! the daemon runs every call.

mod live;

pub use live::LiveError;

use crate::envs::bare_venv::{self, VenvError};
use crate::job::{resolve_parents, Cancel, Jails, JobNames, PythonJob, RunError, RunResult, Sink};
use crate::workspace::{self, WorkspaceError};
use prims_cgroup::CgroupError;
use prims_policy::Policy;
use prims_protocol::jail::LimitRequest;
use std::path::PathBuf;

/// A script run: what to run and where.
#[derive(Debug, Clone)]
pub struct Script {
    pub code: String,
    /// The prims-jailer binary.
    pub jailer: PathBuf,
    /// The empty venv is cached in its `run-envs/`.
    pub state_dir: PathBuf,
    /// A directory to use and keep; `None` for a temporary one.
    pub workspace: Option<PathBuf>,
    /// Run it as the one cell of a live interpreter.
    pub live: bool,
    /// That interpreter forked from a fork template, never cold.
    pub forked: bool,
    /// With `forked`: the script runs in a fresh python forked in place of
    /// the first one, in its jail.
    pub in_place: bool,
}

/// A finished script run. A temporary workspace lives as long as this.
#[derive(Debug)]
pub struct ScriptRun {
    pub result: RunResult,
    pub workspace: PathBuf,
    pub host_uid: u32,
    _temp: Option<tempfile::TempDir>,
}

#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    #[error("filesystem.default_interpreter is not in filesystem.interpreters")]
    NoInterpreter,
    #[error("preparing the venv")]
    Venv(#[source] VenvError),
    #[error("creating a temporary workspace")]
    TempWorkspace(#[source] std::io::Error),
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    #[error("cgroups")]
    Cgroup(#[source] CgroupError),
    #[error(transparent)]
    Run(#[from] RunError),
    #[error(transparent)]
    Live(#[from] LiveError),
}

/// Runs `script` under `policy` to its end.
pub fn run_script(
    policy: &Policy,
    script: Script,
    sink: Sink<'_>,
) -> Result<ScriptRun, ScriptError> {
    let (version, interpreter) = policy
        .default_interpreter()
        .map(|(v, p)| (v.to_string(), p.to_path_buf()))
        .ok_or(ScriptError::NoInterpreter)?;
    let venv = bare_venv::empty(&script.state_dir.join("run-envs"), &interpreter, &version)
        .map_err(ScriptError::Venv)?;
    let host_uid = policy.identity.uid_base;
    let (ws, temp) = match script.workspace {
        Some(dir) => (dir, None),
        None => {
            let temp = tempfile::Builder::new()
                .prefix("prims-run-")
                .tempdir()
                .map_err(ScriptError::TempWorkspace)?;
            (temp.path().to_path_buf(), Some(temp))
        }
    };
    workspace::prepare(&ws, host_uid, host_uid)?;
    // No supervisor instance: names no supervisor's start-up sweep touches.
    let jails = Jails {
        jailer: script.jailer,
        parents: resolve_parents(policy).map_err(ScriptError::Cgroup)?,
        names: JobNames::of_process(),
        trust: None,
    };
    let job = PythonJob {
        code: script.code,
        limits: LimitRequest::default(),
        interpreter,
        venv,
        workspace: ws.clone(),
        host_uid,
    };
    let name = jails.names.script();
    let result = if script.live {
        let origin = match (script.forked, script.in_place) {
            (false, _) => live::Origin::Cold,
            (true, false) => live::Origin::Forked,
            (true, true) => live::Origin::InPlace,
        };
        live::run(policy, &jails, name, job, origin, sink)?
    } else {
        jails.run_python(policy, &name, job, sink, &Cancel::default())?
    };
    Ok(ScriptRun {
        result,
        workspace: ws,
        host_uid,
        _temp: temp,
    })
}
