//! `%pip install` in a cell, served like a call's new requirements: what
//! the session lacks is installed into it by an install jail, and the
//! cell goes on with its state. A conflict cannot reset an interpreter in
//! the middle of its cell: the cell is told what a call would have to ask.

use super::state::Daemon;
use crate::envs::{validate_requirements, Added, EnvError, SessionTarget};
use crate::interpreters::install::{InstallAnswer, Installer};
use crate::job::Cancel;
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
    Box::new(move |requirements, progress, cancel| {
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
            match install_stoppable(d, session, env_dir, missing.clone(), send, cancel).await {
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
/// on a blocking thread: the install jail's own limits bound it. Dropped
/// before its end, it stops the install (see [`install_stoppable`]).
pub(super) async fn install(
    d: Arc<Daemon>,
    session: Arc<Session>,
    env_dir: PathBuf,
    missing: Vec<String>,
    progress: impl Fn(String) + Send + Sync + 'static,
) -> Result<Added, EnvError> {
    install_stoppable(d, session, env_dir, missing, progress, Cancel::default()).await
}

/// [`install`], which `cancel` stops: its jail is killed (or the host's
/// install of uv, if that is under way) and it ends soon after with
/// [`EnvError::Cancelled`]. A caller that wants to know when nothing of
/// the install runs any more cancels and awaits this to its end.
///
/// Dropping this future before its end cancels too: the blocking thread
/// the install runs on cannot be dropped, and would otherwise run the
/// install to its end for no one.
pub(super) async fn install_stoppable(
    d: Arc<Daemon>,
    session: Arc<Session>,
    env_dir: PathBuf,
    missing: Vec<String>,
    progress: impl Fn(String) + Send + Sync + 'static,
    cancel: Cancel,
) -> Result<Added, EnvError> {
    let on_drop = StopOnDrop(Some(cancel.clone()));
    let ended = tokio::task::spawn_blocking(move || {
        let to = SessionTarget {
            env_dir: &env_dir,
            workspace: &session.workspace,
            uid: session.host_uid,
            name: &session.name,
        };
        d.envs
            .install_into_session(to, &missing, &progress, &cancel)
    })
    .await;
    on_drop.disarm();
    ended.map_err(|e| EnvError::Jail {
        message: format!("the install task failed: {e}"),
    })?
}

/// Cancels an install when dropped, unless disarmed first.
struct StopOnDrop(Option<Cancel>);

impl StopOnDrop {
    /// The install ended: nothing is left to stop.
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if let Some(cancel) = self.0.take() {
            cancel.cancel();
        }
    }
}

fn failed(message: String) -> InstallAnswer {
    InstallAnswer {
        ok: false,
        added: Vec::new(),
        message,
    }
}
