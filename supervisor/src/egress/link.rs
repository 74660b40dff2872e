//! One running proxy process and its control channel: sending, the task
//! that reads its answers and routes each to its waiter, and the watchdog
//! that pings it and replaces a process that stops answering.

use super::error::EgressError;
use prims_egress::control::{pair, Channel, FromProxy, ToProxy};
use prims_egress::identity::Account;
use prims_protocol::egress::NetworkReport;
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{oneshot, Notify};
use tokio_util::sync::CancellationToken;

/// How often the watchdog pings the proxy, and how long an answer may take
/// before the process counts as hung and is killed.
const PING_EVERY: Duration = Duration::from_millis(500);
const PONG_WITHIN: Duration = Duration::from_secs(1);

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
    /// Cancelled when the link is dead: its process is killed.
    dead: CancellationToken,
    /// The process the supervisor started: the proxy's parent, outside its
    /// user namespace.
    launcher: Option<u32>,
    /// Jails whose listener this process serves.
    attached: Mutex<HashSet<u64>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn wake(w: &Waiters, key: (Awaited, u64, u64), report: NetworkReport) {
    if let Some(tx) = lock(w).remove(&key) {
        let _ = tx.send(report);
    }
}

/// The fd the proxy finds its control channel on.
const CONTROL_FD: i32 = 3;

impl Link {
    /// Starts a proxy process; `on_dead` runs once when it dies or hangs.
    pub(super) fn start(
        exe: &Path,
        resolve: &[String],
        account: Account,
        on_dead: impl FnOnce() + Send + 'static,
    ) -> Result<Link, EgressError> {
        let start_err = |source| EgressError::Start {
            exe: exe.display().to_string(),
            source,
        };
        let (ours, theirs) = pair().map_err(start_err)?;
        let mut cmd = tokio::process::Command::new(exe);
        cmd.arg("egress-proxy")
            .arg("--control-fd")
            .arg(CONTROL_FD.to_string())
            .arg("--uid")
            .arg(account.uid.to_string())
            .arg("--gid")
            .arg(account.gid.to_string())
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        for r in resolve {
            cmd.arg("--resolve").arg(r);
        }
        let raw = theirs.as_raw_fd();
        // SAFETY: between fork and exec only setsid and dup2, which are
        // async-signal-safe; it leaves fd 3 without close-on-exec.
        unsafe {
            cmd.pre_exec(move || {
                // Away from the server's process group: a signal meant for
                // the server ends the proxy only when the supervisor does.
                libc::setsid();
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
        let launcher = child.id();
        drop(theirs);
        let link = Link {
            channel: Arc::new(Channel::new(ours).map_err(EgressError::Channel)?),
            waiters: Waiters::default(),
            alive: Arc::new(AtomicBool::new(true)),
            dead: CancellationToken::new(),
            launcher,
            attached: Mutex::default(),
        };
        let pongs = Arc::new((AtomicU64::new(0), Notify::new()));
        let (ch, w, a, dead, p) = (
            link.channel.clone(),
            link.waiters.clone(),
            link.alive.clone(),
            link.dead.clone(),
            pongs.clone(),
        );
        tokio::spawn(async move {
            tokio::select! {
                () = read_answers(&ch, &w, &p) => {}
                () = dead.cancelled() => {}
            }
            a.store(false, Ordering::Relaxed);
            dead.cancel();
            lock(&w).clear();
            let _ = child.start_kill();
            let status = child.wait().await;
            tracing::warn!(?status, "egress: the proxy process ended");
            on_dead();
        });
        tokio::spawn(watchdog(
            link.channel.clone(),
            pongs,
            link.alive.clone(),
            link.dead.clone(),
        ));
        Ok(link)
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
            self.dead.cancel();
            EgressError::Channel(e)
        })
    }

    /// Hands `listener` to the process as `jail`, unless it has it.
    pub(super) async fn attach(
        &self,
        jail: u64,
        listener: BorrowedFd<'_>,
    ) -> Result<(), EgressError> {
        if lock(&self.attached).contains(&jail) {
            return Ok(());
        }
        self.send(&ToProxy::Attach { jail }, Some(listener)).await?;
        lock(&self.attached).insert(jail);
        Ok(())
    }

    pub(super) fn detached(&self, jail: u64) {
        lock(&self.attached).remove(&jail);
    }

    /// The proxy itself: the only child of the process the supervisor
    /// started, as the kernel lists it.
    pub(super) fn pid(&self) -> Option<u32> {
        let l = self.launcher?;
        let children = std::fs::read_to_string(format!("/proc/{l}/task/{l}/children")).ok()?;
        children.split_whitespace().next()?.parse().ok()
    }

    /// A receiver for the proxy's answer `what` about `run` in `jail`; it
    /// fails at once when the process dies or hangs.
    pub(super) fn expect(
        &self,
        what: Awaited,
        jail: u64,
        run: u64,
    ) -> oneshot::Receiver<NetworkReport> {
        let (tx, rx) = oneshot::channel();
        if self.is_alive() {
            lock(&self.waiters).insert((what, jail, run), tx);
        }
        rx
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.dead.cancel();
    }
}

async fn read_answers(ch: &Channel, w: &Waiters, pongs: &(AtomicU64, Notify)) {
    loop {
        match ch.recv::<FromProxy>().await {
            Ok(Some((FromProxy::Begun { jail, run }, _))) => {
                wake(w, (Awaited::Begun, jail, run), NetworkReport::default());
            }
            Ok(Some((FromProxy::Report { jail, run, report }, _))) => {
                wake(w, (Awaited::Report, jail, run), report);
            }
            Ok(Some((FromProxy::Refused { jail, why }, _))) => {
                tracing::error!(jail, why, "egress: the proxy refused a jail's listener");
            }
            Ok(Some((FromProxy::Pong { seq }, _))) => {
                pongs.0.fetch_max(seq, Ordering::Relaxed);
                pongs.1.notify_waiters();
            }
            Ok(None) => return,
            Err(e) => {
                tracing::error!(error = %e, "egress: the proxy's control channel failed");
                return;
            }
        }
    }
}

/// Pings the process every [`PING_EVERY`]; one that does not answer within
/// [`PONG_WITHIN`] (stopped, wedged) is declared dead, which kills it.
async fn watchdog(
    ch: Arc<Channel>,
    pongs: Arc<(AtomicU64, Notify)>,
    alive: Arc<AtomicBool>,
    dead: CancellationToken,
) {
    let mut seq = 0u64;
    loop {
        tokio::select! {
            () = tokio::time::sleep(PING_EVERY) => {}
            () = dead.cancelled() => return,
        }
        seq += 1;
        let answered = async {
            loop {
                let notified = pongs.1.notified();
                if pongs.0.load(Ordering::Relaxed) >= seq {
                    return;
                }
                notified.await;
            }
        };
        let pinged = async {
            ch.send(&ToProxy::Ping { seq }, None).await?;
            answered.await;
            Ok::<_, std::io::Error>(())
        };
        tokio::select! {
            r = tokio::time::timeout(PONG_WITHIN, pinged) => if matches!(r, Ok(Ok(()))) { continue },
            () = dead.cancelled() => return,
        }
        tracing::error!(
            "egress: the proxy did not answer within {PONG_WITHIN:?}; killing it and starting another"
        );
        alive.store(false, Ordering::Relaxed);
        dead.cancel();
        return;
    }
}
