//! `%pip install` in a cell, served like a call's new requirements: what
//! the session lacks is installed into it by an install jail, and the
//! cell goes on with its state. A conflict cannot reset an interpreter in
//! the middle of its cell: the cell is told what a call would have to ask.

use super::state::Daemon;
use crate::envs::{validate_requirements, Added, EnvError, SessionTarget};
use crate::interpreters::install::{InstallAnswer, Installer};
use crate::sessions::Session;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// The installer of one call's cell. `have` is what the session asked for
/// before; what the cell installs is added to `added`.
pub(super) fn installer(
    d: Arc<Daemon>,
    session: Arc<Session>,
    env_dir: PathBuf,
    have: Vec<String>,
    added: Arc<Mutex<Vec<String>>>,
) -> Box<Installer> {
    Box::new(move |requirements, progress| {
        let (d, session, env_dir, added) =
            (d.clone(), session.clone(), env_dir.clone(), added.clone());
        let have = have.clone();
        Box::pin(async move {
            let asked = match validate_requirements(&requirements) {
                Ok(r) => r,
                Err(e) => return failed(e.to_string()),
            };
            let missing: Vec<String> = {
                let added = added.lock().unwrap_or_else(|p| p.into_inner());
                asked
                    .into_iter()
                    .filter(|r| !have.contains(r) && !added.contains(r))
                    .collect()
            };
            if missing.is_empty() {
                return InstallAnswer {
                    ok: true,
                    added: Vec::new(),
                    message: "the session has these requirements already".into(),
                };
            }
            let send = move |line: String| {
                let _ = progress.send(line);
            };
            match install(d, session, env_dir, missing.clone(), send).await {
                Ok(Added::Installed(list)) => {
                    added
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .extend(missing);
                    InstallAnswer {
                        ok: true,
                        added: list,
                        message: String::new(),
                    }
                }
                Ok(Added::Conflict(c)) => failed(format!(
                    "{}. Only a new interpreter can have it: call run_code with \
                     requirements={missing:?} (the session's variables are then lost).",
                    c.message()
                )),
                Err(e) => failed(e.to_string()),
            }
        })
    })
}

/// Installs `missing` into `session`, whose environment is at `env_dir`,
/// on a blocking thread: the install jail's own limits bound it.
pub(super) async fn install(
    d: Arc<Daemon>,
    session: Arc<Session>,
    env_dir: PathBuf,
    missing: Vec<String>,
    progress: impl Fn(String) + Send + Sync + 'static,
) -> Result<Added, EnvError> {
    tokio::task::spawn_blocking(move || {
        let to = SessionTarget {
            env_dir: &env_dir,
            workspace: &session.workspace,
            uid: session.host_uid,
            name: &session.name,
        };
        d.envs.install_into_session(to, &missing, &progress)
    })
    .await
    .map_err(|e| EnvError::Jail {
        message: format!("the install task failed: {e}"),
    })?
}

fn failed(message: String) -> InstallAnswer {
    InstallAnswer {
        ok: false,
        added: Vec::new(),
        message,
    }
}
