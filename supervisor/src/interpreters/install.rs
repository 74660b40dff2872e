//! `%pip install` in a cell: the agent asks over the channel, the caller's
//! [`Installer`] installs into the session (as a call's new requirements
//! are), and its progress goes back to the agent line by line, which
//! prints it as the cell's output. The cell's code never gets a network
//! for this: the install jail does, reaching only the package index.
//!
//! The cell that asked is still running under its call's limits, which
//! keep being enforced while the install runs (`cell::follow` polls a
//! [`Serving`] beside its wall timer and CPU samples): an install's time is
//! the call's. At a limit the cell stops waiting for it ([`abandon`]), and
//! the install is stopped: its [`Cancel`] kills the install jail (or the
//! host's one-off install of uv). Its end is still awaited in the
//! background, a moment's work, and until then it is counted: the same
//! interpreter's next install waits for it rather than write the session's
//! packages beside it, and past [`cut_cap`] of them on the server a new one
//! is refused.

use super::channel::{ChannelError, ToAgent};
use super::live::Live;
use crate::job::Cancel;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, MutexGuard};
use tokio::sync::{mpsc, watch};

/// Installs one cell may ask for; more break the channel.
pub(crate) const MAX_INSTALLS: u32 = 8;

/// How an install ended, as the agent is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InstallAnswer {
    pub ok: bool,
    /// Distributions new in the session (`name==version`).
    pub added: Vec<String>,
    /// Why it failed, or what to do about a conflict.
    pub message: String,
}

pub(crate) type InstallFuture = Pin<Box<dyn Future<Output = InstallAnswer> + Send>>;

/// Installs requirements into the session, sending progress lines. Once
/// its [`Cancel`] is cancelled the install stops as soon as it can, and
/// its future then ends (with a failure) soon after; it must still be
/// awaited to its end, which comes once nothing of the install runs.
pub(crate) type Installer =
    dyn Fn(Vec<String>, mpsc::UnboundedSender<String>, Cancel) -> InstallFuture + Send + Sync;

/// Installs that a time limit cut short and that are being stopped, by the
/// job of the interpreter whose cell asked; each entry ends (its sender
/// drops) with its install. Process-wide: the job names are.
static CUT: Mutex<BTreeMap<String, watch::Receiver<()>>> = Mutex::new(BTreeMap::new());

fn cut_installs() -> MutexGuard<'static, BTreeMap<String, watch::Receiver<()>>> {
    CUT.lock().unwrap_or_else(|p| p.into_inner())
}

/// Installs cut short that may still be ending at once on the server
/// before a new one is refused: one per core, as many as the run slots
/// that held them would have by default (`limits.max_concurrent_runs`).
/// Each is stopped when cut, so this bounds a burst of cuts, not a backlog
/// of installs running on.
fn cut_cap() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

/// An install a running cell asked for, under way.
pub(crate) struct Serving<'a> {
    stage: Stage<'a>,
    progress: mpsc::UnboundedReceiver<String>,
}

enum Stage<'a> {
    /// Not started: an install of the same interpreter that a time limit
    /// cut short is still being stopped.
    After {
        earlier: watch::Receiver<()>,
        installer: &'a Installer,
        requirements: Vec<String>,
        progress: mpsc::UnboundedSender<String>,
    },
    /// Under way; the [`Cancel`] stops it.
    Running(InstallFuture, Cancel),
    /// It has answered.
    Ended,
}

/// What an install under way has to say next.
pub(crate) enum Served {
    /// A progress line, for the agent to print.
    Line(String),
    /// It ended: the lines it sent last, then how it ended.
    Ended(Vec<String>, InstallAnswer),
}

/// Starts installing `requirements` for a cell of the interpreter `job`;
/// the answer at once when it cannot be done.
pub(crate) fn start<'a>(
    job: &str,
    installer: Option<&'a Installer>,
    requirements: Vec<String>,
) -> Result<Serving<'a>, InstallAnswer> {
    let Some(installer) = installer else {
        return Err(failed("installing packages is not available here".into()));
    };
    let (tx, progress) = mpsc::unbounded_channel();
    let earlier = {
        let cut = cut_installs();
        match cut.get(job) {
            Some(earlier) => Some(earlier.clone()),
            None if cut.len() >= cut_cap() => {
                return Err(failed(format!(
                    "{} installs that time limits cut short are still running on this \
                     server; try again when they have ended",
                    cut.len()
                )))
            }
            None => None,
        }
    };
    let stage = match earlier {
        Some(earlier) => {
            let _ =
                tx.send("waiting for an install that a time limit cut short to end first".into());
            Stage::After {
                earlier,
                installer,
                requirements,
                progress: tx,
            }
        }
        None => run(installer, requirements, tx),
    };
    Ok(Serving { stage, progress })
}

impl Serving<'_> {
    /// Its next progress line, or its end. Cancel-safe: a caller that
    /// drops this future (another branch of its `select!` won) loses
    /// nothing, and may ask again. Never ready after [`Served::Ended`].
    pub(crate) async fn next(&mut self) -> Served {
        if let Stage::After { earlier, .. } = &mut self.stage {
            tokio::select! {
                biased;
                Some(line) = self.progress.recv() => return Served::Line(line),
                () = ended(earlier) => {}
            }
            self.stage = match std::mem::replace(&mut self.stage, Stage::Ended) {
                Stage::After {
                    installer,
                    requirements,
                    progress,
                    ..
                } => run(installer, requirements, progress),
                other => other,
            };
        }
        let answer = match &mut self.stage {
            Stage::Running(answer, _) => answer,
            Stage::After { .. } | Stage::Ended => return std::future::pending().await,
        };
        tokio::select! {
            // Lines first: those sent before the end go out before it.
            biased;
            Some(line) = self.progress.recv() => Served::Line(line),
            answer = answer => {
                self.stage = Stage::Ended;
                let mut last = Vec::new();
                while let Ok(line) = self.progress.try_recv() {
                    last.push(line);
                }
                Served::Ended(last, answer)
            }
        }
    }
}

/// Waits for the end of an install cut short: nothing is ever sent, and
/// its end drops the sender. Cancel-safe.
async fn ended(earlier: &mut watch::Receiver<()>) {
    while earlier.changed().await.is_ok() {}
}

/// Starts the install: the stage of an install under way.
fn run<'a>(
    installer: &Installer,
    requirements: Vec<String>,
    progress: mpsc::UnboundedSender<String>,
) -> Stage<'a> {
    let cancel = Cancel::default();
    Stage::Running(installer(requirements, progress, cancel.clone()), cancel)
}

/// The cell of interpreter `job` stops waiting for `serving` (a limit ran
/// out, or the call ended otherwise). An install not started yet is
/// dropped; one under way is stopped, and its end is awaited in a task of
/// its own, its lines and answer going nowhere: until then it counts as
/// cut short, so that the interpreter's next install cannot start while
/// this one's jail may still write into the session's site directory.
pub(crate) fn abandon(job: &str, serving: Serving<'_>) {
    let Stage::Running(answer, cancel) = serving.stage else {
        return;
    };
    cancel.cancel();
    let (ended, end) = watch::channel(());
    cut_installs().insert(job.to_string(), end);
    let job = job.to_string();
    tokio::spawn(async move {
        let a = answer.await;
        tracing::info!(
            job = %job,
            ok = a.ok,
            message = %a.message,
            "an install that was cut short has ended"
        );
        cut_installs().remove(&job);
        drop(ended);
    });
}

/// Sends the agent one progress line of the install it waits for.
pub(crate) async fn progress(live: &mut Live, line: String) -> Result<(), ChannelError> {
    live.writer.send(&ToAgent::InstallProgress { line }).await
}

/// Tells the agent how the install it waits for ended.
pub(crate) async fn tell(live: &mut Live, a: InstallAnswer) -> Result<(), ChannelError> {
    let msg = ToAgent::Installed {
        ok: a.ok,
        added: a.added,
        message: a.message,
    };
    live.writer.send(&msg).await
}

fn failed(message: String) -> InstallAnswer {
    InstallAnswer {
        ok: false,
        added: Vec::new(),
        message,
    }
}
