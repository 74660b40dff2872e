//! One running proxy process and its control channel: sending, and the
//! task that reads its answers and routes each report to its waiter.

use super::EgressError;
use prims_egress::control::{pair, Channel, FromProxy};
use prims_protocol::egress::NetworkReport;
use serde::Serialize;
use std::collections::HashMap;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// What a waiter waits for, of which run of which jail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Awaited {
    Begun,
    Report,
}

type Waiters = Arc<Mutex<HashMap<(Awaited, u64, u64), oneshot::Sender<NetworkReport>>>>;

#[derive(Debug)]
pub(super) struct Link {
    channel: Arc<Channel>,
    waiters: Waiters,
    alive: Arc<AtomicBool>,
    pid: Option<u32>,
}

fn wake(w: &Waiters, key: (Awaited, u64, u64), report: NetworkReport) {
    let tx = w.lock().unwrap_or_else(|p| p.into_inner()).remove(&key);
    if let Some(tx) = tx {
        let _ = tx.send(report);
    }
}

/// The fd the proxy finds its control channel on.
const CONTROL_FD: i32 = 3;

impl Link {
    pub(super) fn start(exe: &Path, resolve: &[String]) -> Result<Link, EgressError> {
        let start_err = |source| EgressError::Start {
            exe: exe.display().to_string(),
            source,
        };
        let (ours, theirs) = pair().map_err(start_err)?;
        let mut cmd = tokio::process::Command::new(exe);
        cmd.arg("egress-proxy")
            .arg("--control-fd")
            .arg(CONTROL_FD.to_string())
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        for r in resolve {
            cmd.arg("--resolve").arg(r);
        }
        let raw = theirs.as_raw_fd();
        // SAFETY: between fork and exec only dup2, which is async-signal-safe;
        // it leaves fd 3 without close-on-exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::dup2(raw, CONTROL_FD) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if raw == CONTROL_FD {
                    libc::fcntl(CONTROL_FD, libc::F_SETFD, 0);
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn().map_err(start_err)?;
        let pid = child.id();
        drop(theirs);
        let channel = Arc::new(Channel::new(ours).map_err(EgressError::Channel)?);
        let waiters: Waiters = Arc::default();
        let alive = Arc::new(AtomicBool::new(true));
        let (ch, w, a) = (channel.clone(), waiters.clone(), alive.clone());
        tokio::spawn(async move {
            loop {
                match ch.recv::<FromProxy>().await {
                    Ok(Some((FromProxy::Begun { jail, run }, _))) => {
                        wake(&w, (Awaited::Begun, jail, run), NetworkReport::default());
                    }
                    Ok(Some((FromProxy::Report { jail, run, report }, _))) => {
                        wake(&w, (Awaited::Report, jail, run), report);
                    }
                    Ok(Some((FromProxy::Refused { jail, why }, _))) => {
                        tracing::error!(jail, why, "egress: the proxy refused a jail's listener");
                    }
                    Ok(None) => break,
                    Err(e) => {
                        tracing::error!(error = %e, "egress: the proxy's control channel failed");
                        break;
                    }
                }
            }
            a.store(false, Ordering::Relaxed);
            w.lock().unwrap_or_else(|p| p.into_inner()).clear();
            let status = child.wait().await;
            tracing::warn!(?status, "egress: the proxy process ended");
        });
        Ok(Link {
            channel,
            waiters,
            alive,
            pid,
        })
    }

    pub(super) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Relaxed)
    }

    pub(super) async fn send(
        &self,
        msg: &impl Serialize,
        fd: Option<BorrowedFd<'_>>,
    ) -> Result<(), EgressError> {
        self.channel.send(msg, fd).await.map_err(|e| {
            self.alive.store(false, Ordering::Relaxed);
            EgressError::Channel(e)
        })
    }

    pub(super) fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// A receiver for the proxy's answer `what` about `run` in `jail`.
    pub(super) fn expect(
        &self,
        what: Awaited,
        jail: u64,
        run: u64,
    ) -> oneshot::Receiver<NetworkReport> {
        let (tx, rx) = oneshot::channel();
        self.waiters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((what, jail, run), tx);
        rx
    }
}
