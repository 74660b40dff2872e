//! The supervisor's side of the egress proxy process (`prims egress-proxy`,
//! see `prims-egress`): it starts the process, again after it dies or
//! hangs, hands it each proxied jail's listener, and begins and ends runs
//! there. The process runs as an account of its own (`prims-egress`), out
//! of every other process's reach but root's; only this side decides what
//! a run may reach (`call`: the policy's list, narrowed by the tenant's and
//! the call's).

mod call;
mod error;
mod inspection;
mod jail;
mod link;
mod listener;

pub(crate) use call::{call_rules, NetCall};
pub use error::EgressError;
pub(crate) use inspection::TRUST_IN_JAIL;
pub use inspection::{read_values, Trust};
pub(crate) use jail::{proxy_env, run_env, CA_BUNDLE, CA_DIR, JAIL_PORT};
pub(crate) use listener::receive_listener;

pub use prims_egress::identity::Account;

use error::ANSWER_TIMEOUT;
use link::{Awaited, Link};
use prims_egress::control::ToProxy;
use prims_egress::decide::Rules;
use prims_egress::run::Budget;
use prims_protocol::egress::NetworkReport;
use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

/// The least time between two starts of the process.
const RESTART_EVERY: Duration = Duration::from_secs(1);

/// The proxy process, started on first use, and again when it dies or
/// hangs, with every attached jail and its run in progress handed over.
#[derive(Debug)]
pub struct EgressProxy {
    exe: PathBuf,
    resolve: Vec<String>,
    account: Account,
    link: tokio::sync::Mutex<Option<Arc<Link>>>,
    /// Every attached jail: our copy of its listener, and its run in
    /// progress, to hand to a process started after the last one ended.
    jails: Mutex<HashMap<u64, JailEntry>>,
    next_jail: AtomicU64,
    next_run: AtomicU64,
    last_start: Mutex<Option<Instant>>,
    /// What a process is told first: the CA, roots and secrets in force.
    config: Mutex<Option<ToProxy>>,
}

#[derive(Debug)]
struct JailEntry {
    listener: Arc<OwnedFd>,
    run: Option<ToProxy>,
}

/// A jail whose listener the proxy serves; dropping it detaches the jail.
#[derive(Debug)]
pub struct Attached {
    proxy: Arc<EgressProxy>,
    jail: u64,
}

/// One run in an attached jail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunId(u64);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl EgressProxy {
    /// `exe` is the `prims` binary; `account` the proxy's own (never
    /// root, nobody or the front-end's); `resolve` the test-only fixed
    /// names.
    pub fn new(exe: PathBuf, resolve: Vec<String>, account: Account) -> Arc<EgressProxy> {
        Arc::new(EgressProxy {
            exe,
            resolve,
            account,
            link: tokio::sync::Mutex::new(None),
            jails: Mutex::default(),
            next_jail: AtomicU64::new(1),
            next_run: AtomicU64::new(1),
            last_start: Mutex::default(),
            config: Mutex::default(),
        })
    }

    /// Puts `config` (a [`ToProxy::Configure`]) in force: in the running
    /// process now, and first in every process started from now on.
    pub async fn configure(self: &Arc<Self>, config: ToProxy) -> Result<(), EgressError> {
        *lock(&self.config) = Some(config.clone());
        let link = self.link.lock().await.clone();
        if let Some(l) = link.filter(|l| l.is_alive()) {
            l.send(&config, None).await?;
        }
        Ok(())
    }

    /// The live process, started if there is none, with every attached
    /// jail handed to it.
    async fn link(self: &Arc<Self>) -> Result<Arc<Link>, EgressError> {
        let mut guard = self.link.lock().await;
        if let Some(l) = guard.as_ref().filter(|l| l.is_alive()) {
            return Ok(l.clone());
        }
        if guard.take().is_some() {
            tracing::error!("the egress proxy process ended or hung; starting it again");
        }
        let wait = lock(&self.last_start)
            .map(|t| RESTART_EVERY.saturating_sub(t.elapsed()))
            .unwrap_or_default();
        tokio::time::sleep(wait).await;
        *lock(&self.last_start) = Some(Instant::now());
        let me = Arc::downgrade(self);
        let l = Arc::new(Link::start(
            &self.exe,
            &self.resolve,
            self.account,
            move || restart(me),
        )?);
        let config = lock(&self.config).clone();
        if let Some(config) = config {
            l.send(&config, None).await?;
        }
        let jails: Vec<(u64, Arc<OwnedFd>, Option<ToProxy>)> = lock(&self.jails)
            .iter()
            .map(|(j, e)| (*j, e.listener.clone(), e.run.clone()))
            .collect();
        for (jail, listener, run) in jails {
            l.attach(jail, listener.as_fd()).await?;
            if let Some(begin) = run {
                l.send(&begin, None).await?;
            }
        }
        *guard = Some(l.clone());
        Ok(l)
    }

    /// The proxy's pid (not its launcher's), once started.
    pub async fn pid(&self) -> Option<u32> {
        self.link.lock().await.as_ref().and_then(|l| l.pid())
    }

    /// Hands `listener` (a jail's, listening) to the proxy.
    pub async fn attach(self: &Arc<Self>, listener: OwnedFd) -> Result<Attached, EgressError> {
        let jail = self.next_jail.fetch_add(1, Ordering::Relaxed);
        let listener = Arc::new(listener);
        lock(&self.jails).insert(
            jail,
            JailEntry {
                listener: listener.clone(),
                run: None,
            },
        );
        let attached = Attached {
            proxy: self.clone(),
            jail,
        };
        // A new process was handed every jail; a running one gets this one.
        self.link().await?.attach(jail, listener.as_fd()).await?;
        Ok(attached)
    }
}

/// Starts a process again at once when one dies or hangs while jails are
/// attached: a call under way is served again within a second or two.
fn restart(proxy: Weak<EgressProxy>) {
    let Some(proxy) = proxy.upgrade() else {
        return;
    };
    if lock(&proxy.jails).is_empty() {
        return;
    }
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        rt.spawn(async move {
            if let Err(e) = proxy.link().await {
                tracing::error!(error = %e, "egress: could not start the proxy again");
            }
        });
    }
}

impl Attached {
    /// Run starts: new connections get `rules` and `budget`.
    pub async fn begin(&self, rules: &Rules, budget: Budget) -> Result<RunId, EgressError> {
        match self.try_begin(rules, budget).await {
            // The process died or hung meanwhile: the second try is served
            // by the one started in its place.
            Err(EgressError::Channel(_) | EgressError::Ended) => {
                tracing::warn!("egress: the proxy ended as a run began; trying again");
                self.try_begin(rules, budget).await
            }
            r => r,
        }
    }

    async fn try_begin(&self, rules: &Rules, budget: Budget) -> Result<RunId, EgressError> {
        let link = self.proxy.link().await?;
        let run = self.proxy.next_run.fetch_add(1, Ordering::Relaxed);
        let msg = ToProxy::Begin {
            jail: self.jail,
            run,
            list: rules.list.clone(),
            trust_named_addresses: rules.trust_named_addresses,
            max_bytes: budget.max_bytes,
            max_connections: budget.max_connections,
            inspect: rules.inspect,
            passthrough: rules.passthrough.clone(),
            placements: rules.placements.clone(),
        };
        let begun = link.expect(Awaited::Begun, self.jail, run);
        link.send(&msg, None).await?;
        match tokio::time::timeout(ANSWER_TIMEOUT, begun).await {
            Ok(Ok(_)) => {
                if let Some(e) = lock(&self.proxy.jails).get_mut(&self.jail) {
                    e.run = Some(msg);
                }
                Ok(RunId(run))
            }
            Ok(Err(_)) => Err(EgressError::Ended),
            Err(_) => Err(EgressError::NoAnswer),
        }
    }

    /// The run is over: its connections are closed, and this is its
    /// record (empty, with a warning logged, if the proxy could not give
    /// it; a proxy started during the run records only what came after).
    pub async fn end(&self, run: RunId) -> NetworkReport {
        if let Some(e) = lock(&self.proxy.jails).get_mut(&self.jail) {
            e.run = None;
        }
        let link = self.proxy.link.lock().await.clone();
        let Some(link) = link.filter(|l| l.is_alive()) else {
            tracing::warn!(jail = self.jail, "egress: no proxy to end a run with");
            return NetworkReport::default();
        };
        let wait = link.expect(Awaited::Report, self.jail, run.0);
        let msg = ToProxy::End {
            jail: self.jail,
            run: run.0,
        };
        if let Err(e) = link.send(&msg, None).await {
            tracing::warn!(error = %e, "egress: could not end a run");
            return NetworkReport::default();
        }
        match tokio::time::timeout(ANSWER_TIMEOUT, wait).await {
            Ok(Ok(r)) => r,
            _ => {
                tracing::warn!(
                    jail = self.jail,
                    "egress: no record of a run from the proxy"
                );
                NetworkReport::default()
            }
        }
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        lock(&self.proxy.jails).remove(&self.jail);
        let (proxy, jail) = (self.proxy.clone(), self.jail);
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let link = proxy.link.lock().await.clone();
                if let Some(link) = link.filter(|l| l.is_alive()) {
                    link.detached(jail);
                    let _ = link.send(&ToProxy::Detach { jail }, None).await;
                }
            });
        }
    }
}
