//! `%pip install` in a cell: the agent asks over the channel, the caller's
//! [`Installer`] installs into the session (as a call's new requirements
//! are), and its progress goes back to the agent line by line, which
//! prints it as the cell's output. The cell's code never gets a network
//! for this: the install jail does, reaching only the package index.

use super::channel::{ChannelError, ToAgent};
use super::live::Live;
use std::future::Future;
use std::pin::Pin;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

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

/// Installs requirements into the session, sending progress lines.
pub(crate) type Installer =
    dyn Fn(Vec<String>, mpsc::UnboundedSender<String>) -> InstallFuture + Send + Sync;

/// How forwarding an install ended, when not with the agent told.
pub(crate) enum Interrupted {
    Cancelled,
    Broken(ChannelError),
}

/// Runs the install the running cell of `live` asked for, forwarding its
/// progress, then tells the agent how it ended.
pub(crate) async fn serve(
    live: &mut Live,
    installer: Option<&Installer>,
    requirements: Vec<String>,
    cancel: &CancellationToken,
) -> Result<(), Interrupted> {
    let Some(installer) = installer else {
        let answer = InstallAnswer {
            ok: false,
            added: Vec::new(),
            message: "installing packages is not available here".into(),
        };
        return tell(live, answer).await;
    };
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut install = installer(requirements, tx);
    let answer = loop {
        tokio::select! {
            a = &mut install => break a,
            Some(line) = rx.recv() => {
                let msg = ToAgent::InstallProgress { line };
                live.writer.send(&msg).await.map_err(Interrupted::Broken)?;
            }
            _ = cancel.cancelled() => return Err(Interrupted::Cancelled),
        }
    };
    while let Ok(line) = rx.try_recv() {
        let msg = ToAgent::InstallProgress { line };
        live.writer.send(&msg).await.map_err(Interrupted::Broken)?;
    }
    tell(live, answer).await
}

async fn tell(live: &mut Live, a: InstallAnswer) -> Result<(), Interrupted> {
    let msg = ToAgent::Installed {
        ok: a.ok,
        added: a.added,
        message: a.message,
    };
    live.writer.send(&msg).await.map_err(Interrupted::Broken)
}
