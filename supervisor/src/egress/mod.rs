//! The supervisor's side of the egress proxy process (`prims egress-proxy`,
//! see `prims-egress`): it starts the process, again after it dies, hands
//! it each proxied jail's listener, and begins and ends runs there. The
//! process runs as nobody; only this side decides what a run may reach.

mod link;
mod listener;

pub(crate) use listener::receive_listener;

use link::{Awaited, Link};
use prims_egress::control::ToProxy;
use prims_egress::decide::Rules;
use prims_egress::run::Budget;
use prims_protocol::egress::NetworkReport;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The port of the listener in a proxied jail's own loopback.
pub(crate) const JAIL_PORT: u16 = 3128;

/// The CA bundle a proxied jail verifies TLS with, bound read-only with
/// the rest of `/etc/ssl` (the tunnel stays end to end).
pub(crate) const CA_DIR: &str = "/etc/ssl";
pub(crate) const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// The environment that points HTTP clients in a proxied jail (requests,
/// urllib, httpx, pip, uv) at the proxy, for every host: an install jail's
/// index may well be on the host's loopback, which only the proxy reaches.
pub(crate) fn proxy_env() -> Vec<String> {
    let proxy = format!("http://127.0.0.1:{JAIL_PORT}");
    let mut env: Vec<String> = [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ]
    .iter()
    .map(|v| format!("{v}={proxy}"))
    .collect();
    if std::path::Path::new(CA_BUNDLE).is_file() {
        env.push(format!("SSL_CERT_FILE={CA_BUNDLE}"));
    }
    env
}

/// [`proxy_env`] for a run's jail, whose own loopback (servers the code
/// starts itself) is reached directly.
pub(crate) fn run_env() -> Vec<String> {
    let mut env = proxy_env();
    env.push("NO_PROXY=localhost,127.0.0.1,::1".into());
    env.push("no_proxy=localhost,127.0.0.1,::1".into());
    env
}

/// How long the proxy may take to answer the start or end of a run.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum EgressError {
    #[error("starting the egress proxy ({exe}): {source}")]
    Start {
        exe: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the egress proxy's control channel: {0}")]
    Channel(#[source] std::io::Error),
    #[error("the egress proxy did not start the run within {ANSWER_TIMEOUT:?}")]
    NoAnswer,
}

/// The proxy process, started on first use.
#[derive(Debug)]
pub struct EgressProxy {
    exe: PathBuf,
    resolve: Vec<String>,
    link: tokio::sync::Mutex<Option<Arc<Link>>>,
    next_jail: AtomicU64,
    next_run: AtomicU64,
}

/// A jail whose listener the proxy serves; dropping it detaches the jail.
#[derive(Debug)]
pub struct Attached {
    proxy: Arc<EgressProxy>,
    jail: u64,
    /// Our copy, to attach the jail again to a proxy that was restarted.
    listener: OwnedFd,
    on: tokio::sync::Mutex<Option<Arc<Link>>>,
}

/// One run in an attached jail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunId(u64);

impl EgressProxy {
    /// `exe` is the `prims` binary; `resolve` the test-only fixed names.
    pub fn new(exe: PathBuf, resolve: Vec<String>) -> Arc<EgressProxy> {
        Arc::new(EgressProxy {
            exe,
            resolve,
            link: tokio::sync::Mutex::new(None),
            next_jail: AtomicU64::new(1),
            next_run: AtomicU64::new(1),
        })
    }

    /// The live process, started if there is none.
    async fn link(&self) -> Result<Arc<Link>, EgressError> {
        let mut guard = self.link.lock().await;
        if let Some(l) = guard.as_ref().filter(|l| l.is_alive()) {
            return Ok(l.clone());
        }
        if guard.is_some() {
            tracing::error!("the egress proxy process ended; starting it again");
        }
        let l = Arc::new(Link::start(&self.exe, &self.resolve)?);
        *guard = Some(l.clone());
        Ok(l)
    }

    /// The process's pid, once started.
    pub async fn pid(&self) -> Option<u32> {
        self.link.lock().await.as_ref().and_then(|l| l.pid())
    }

    /// Hands `listener` (a jail's, listening) to the proxy.
    pub async fn attach(self: &Arc<Self>, listener: OwnedFd) -> Result<Attached, EgressError> {
        let a = Attached {
            proxy: self.clone(),
            jail: self.next_jail.fetch_add(1, Ordering::Relaxed),
            listener,
            on: tokio::sync::Mutex::new(None),
        };
        a.ensure_attached().await?;
        Ok(a)
    }
}

impl Attached {
    /// Attaches the jail to the live proxy if it is not attached there yet.
    async fn ensure_attached(&self) -> Result<Arc<Link>, EgressError> {
        let link = self.proxy.link().await?;
        let mut on = self.on.lock().await;
        if !on.as_ref().is_some_and(|l| Arc::ptr_eq(l, &link)) {
            let msg = ToProxy::Attach { jail: self.jail };
            link.send(&msg, Some(self.listener.as_fd())).await?;
            *on = Some(link.clone());
        }
        Ok(link)
    }

    /// Run starts: new connections get `rules` and `budget`.
    pub async fn begin(&self, rules: &Rules, budget: Budget) -> Result<RunId, EgressError> {
        match self.try_begin(rules, budget).await {
            // The process died before its reader saw EOF: the write found it
            // (and marked the link dead), so the second try starts a new one.
            Err(EgressError::Channel(e)) => {
                tracing::warn!(error = %e, "egress: the proxy's channel broke; starting it again");
                self.try_begin(rules, budget).await
            }
            r => r,
        }
    }

    async fn try_begin(&self, rules: &Rules, budget: Budget) -> Result<RunId, EgressError> {
        let link = self.ensure_attached().await?;
        let run = self.proxy.next_run.fetch_add(1, Ordering::Relaxed);
        let msg = ToProxy::Begin {
            jail: self.jail,
            run,
            list: rules.list.clone(),
            trust_named_addresses: rules.trust_named_addresses,
            max_bytes: budget.max_bytes,
            max_connections: budget.max_connections,
        };
        let begun = link.expect(Awaited::Begun, self.jail, run);
        link.send(&msg, None).await?;
        match tokio::time::timeout(ANSWER_TIMEOUT, begun).await {
            Ok(Ok(_)) => Ok(RunId(run)),
            _ => Err(EgressError::NoAnswer),
        }
    }

    /// The run is over: its record (empty, with a warning logged, if the
    /// proxy could not give it).
    pub async fn end(&self, run: RunId) -> NetworkReport {
        let Some(link) = self.on.lock().await.clone() else {
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
        let link = self.on.get_mut().take();
        let jail = self.jail;
        if let (Some(link), Ok(rt)) = (link, tokio::runtime::Handle::try_current()) {
            rt.spawn(async move {
                let _ = link.send(&ToProxy::Detach { jail }, None).await;
            });
        }
    }
}
