//! Readiness. A server is ready once what a new session's first call needs
//! is up: the base environment, the IPython layer, with templates on the
//! default environment's fork template, and with a warm pool its first
//! spare. [`bring_up`] brings them up in that order as the supervisor
//! starts and says which it waits for; the
//! socket's `stats` (so the front-end's `/health`), systemd (`READY=1`,
//! `STATUS=`) and `prims doctor` read it. A part that fails does not keep
//! the server from being ready: it is named as degraded (a failed
//! template only means cold starts). Past [`READY_WITHIN`] the server
//! reports ready whatever it still waits for, and names that.

use crate::envs::Envs;
use crate::interpreters::ipython::IpythonLayer;
use crate::interpreters::Interpreters;
use prims_policy::Policy;
use sd_notify::NotifyState;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The longest the server is not ready after it starts: a slow index
/// keeps a base-environment build going, and systemd's start times out.
pub(crate) const READY_WITHIN: Duration = Duration::from_secs(300);

/// What the start-up is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    BaseEnvironment,
    IpythonLayer,
    Template,
    Pool,
}

impl Step {
    fn waiting_for(self) -> &'static str {
        match self {
            Step::BaseEnvironment => "the base environment (python.default_packages), being built",
            Step::IpythonLayer => "the IPython layer (python.ipython_packages), being built",
            Step::Template => "the default environment's fork template, starting",
            Step::Pool => "the warm pool's first spare session, starting",
        }
    }
}

#[derive(Debug, Default)]
struct State {
    /// `None` once every step is done.
    doing: Option<Step>,
    /// What failed on the way, in words.
    degraded: Vec<String>,
}

/// The server's readiness, as the start-up leaves it.
#[derive(Debug)]
pub(crate) struct Readiness {
    started: Instant,
    state: Mutex<State>,
}

/// What [`Readiness::report`] says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Report {
    pub ready: bool,
    /// What the start-up still waits for.
    pub waiting_for: Vec<String>,
    pub degraded: Vec<String>,
}

impl Readiness {
    pub(crate) fn new() -> Arc<Readiness> {
        Arc::new(Readiness {
            started: Instant::now(),
            state: Mutex::new(State {
                doing: Some(Step::BaseEnvironment),
                degraded: Vec::new(),
            }),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn report(&self) -> Report {
        let state = self.state();
        Report {
            ready: state.doing.is_none() || self.started.elapsed() >= READY_WITHIN,
            waiting_for: state
                .doing
                .iter()
                .map(|s| s.waiting_for().to_string())
                .collect(),
            degraded: state.degraded.clone(),
        }
    }

    fn doing(&self, step: Option<Step>) {
        self.state().doing = step;
        let status = match step {
            Some(s) => format!("waiting for {}", s.waiting_for()),
            None => "ready".to_string(),
        };
        tell_systemd(NotifyState::Status(&status));
    }

    fn degrade(&self, why: String) {
        tracing::warn!(why, "the server starts degraded");
        self.state().degraded.push(why);
    }
}

/// Brings up what a first call needs, in order, then tells systemd the
/// supervisor is ready (as it does, naming what it still waits for, at
/// [`READY_WITHIN`] if that comes first).
pub(crate) async fn bring_up(
    readiness: Arc<Readiness>,
    envs: Arc<Envs>,
    interpreters: Arc<Interpreters>,
    policy: Arc<Policy>,
) {
    let bound = {
        let readiness = readiness.clone();
        tokio::spawn(async move {
            tokio::time::sleep(READY_WITHIN).await;
            let late = readiness.report().waiting_for;
            if !late.is_empty() {
                tracing::warn!(
                    ?late,
                    "ready after {} s, still waiting",
                    READY_WITHIN.as_secs()
                );
                let status = format!("ready, still waiting for {}", late.join(", "));
                tell_systemd(NotifyState::Status(&status));
                tell_systemd(NotifyState::Ready);
            }
        })
    };
    steps(&readiness, &envs, &interpreters, &policy).await;
    readiness.doing(None);
    bound.abort();
    tracing::info!(
        ms = readiness.started.elapsed().as_millis() as u64,
        degraded = ?readiness.report().degraded,
        "supervisor ready"
    );
    tell_systemd(NotifyState::Ready);
}

async fn steps(readiness: &Readiness, envs: &Envs, interpreters: &Interpreters, policy: &Policy) {
    readiness.doing(Some(Step::BaseEnvironment));
    let lease = match envs.ensure(&[], &|_| {}).await {
        Ok(lease) => lease,
        Err(e) => {
            readiness.degrade(format!(
                "the base environment did not build ({e}); calls without requirements fail until it does"
            ));
            return;
        }
    };
    readiness.doing(Some(Step::IpythonLayer));
    let ipython = IpythonLayer::get(policy, envs, &|_| {}).await;
    let wanted = policy.python.ipython_site.is_some() || !policy.python.ipython_packages.is_empty();
    if wanted && ipython.is_none() {
        readiness.degrade(
            "the IPython layer is not there; cells run as plain Python (the log says why)".into(),
        );
    }
    if policy.interpreters.fork_templates {
        readiness.doing(Some(Step::Template));
        if let Err(why) = interpreters
            .start_default_template(policy, lease, ipython)
            .await
        {
            readiness.degrade(format!(
                "the default environment's fork template did not start ({why}); interpreters start cold"
            ));
        }
    }
    if policy.interpreters.pool_size > 0 {
        readiness.doing(Some(Step::Pool));
        if !interpreters.wait_for_spare(POOL_WITHIN).await {
            readiness.degrade(format!(
                "the warm pool has no spare session after {} s; new sessions start their interpreter on their first call",
                POOL_WITHIN.as_secs()
            ));
        }
    }
}

/// How long readiness waits for the pool's first spare, which the pool
/// makes as soon as the template is up.
const POOL_WITHIN: Duration = Duration::from_secs(30);

/// One state for systemd (`Type=notify`); nothing without NOTIFY_SOCKET.
fn tell_systemd(state: NotifyState<'_>) {
    if let Err(e) = sd_notify::notify(false, &[state]) {
        tracing::warn!(error = %e, "could not tell systemd how the supervisor starts");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_once_every_step_is_done_with_what_failed_named() {
        let r = Readiness::new();
        let first = r.report();
        assert!(!first.ready);
        assert_eq!(first.waiting_for.len(), 1);
        assert!(first.waiting_for[0].starts_with("the base environment"));
        r.doing(Some(Step::Template));
        r.degrade("the template did not start".into());
        assert!(!r.report().ready);
        r.doing(None);
        assert_eq!(
            r.report(),
            Report {
                ready: true,
                waiting_for: vec![],
                degraded: vec!["the template did not start".into()]
            }
        );
    }

    #[test]
    fn ready_past_the_bound_whatever_it_waits_for() {
        let r = Readiness {
            started: Instant::now() - READY_WITHIN,
            state: Mutex::new(State {
                doing: Some(Step::IpythonLayer),
                degraded: vec![],
            }),
        };
        let report = r.report();
        assert!(report.ready);
        assert_eq!(report.waiting_for, [Step::IpythonLayer.waiting_for()]);
    }
}
