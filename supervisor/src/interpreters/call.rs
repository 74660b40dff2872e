//! One call in the session's interpreter, in phases: keep the interpreter
//! or find it unfit and start another (made room for under the caps, given
//! what a stop saved), say which it is, run the cell inside a run of the
//! egress proxy, and leave the slot ready for the next call.

use super::cell::{self, CellEnd};
use super::channel::Named;
use super::install::Installer;
use super::ipython::IpythonLayer;
use super::live::{Carried, HeldLimits, Live};
use super::pumps::OutputTx;
use super::registry::Interpreters;
use super::slot::{Carry, Slot};
use super::start::{StartError, StartSpec};
use crate::egress::NetCall;
use crate::envs::{EnvLease, Envs};
use crate::sessions::Session;
use prims_policy::Policy;
use prims_protocol::egress::NetworkReport;
use prims_protocol::jail::JobLimits;
use prims_protocol::wire::{Interpreter, InterpreterState, NotRestored, ResetReason, RunRequest};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// One call: the request, the environment it runs in, and what it may
/// reach through the egress proxy (allowlist mode only).
pub(crate) struct LiveCall<'a> {
    pub req: &'a RunRequest,
    pub lease: EnvLease,
    /// Where a new interpreter's IPython layer comes from.
    pub ipython: IpythonFrom<'a>,
    pub net: Option<&'a NetCall>,
    /// Why a new environment, if this call's differs from the session's
    /// (a conflict), in place of `requirements_changed`, and in words.
    pub env_change: Option<(ResetReason, String)>,
    /// What this call installed into the session first.
    pub installed: Vec<String>,
    /// Serves the cell's `%pip install`.
    pub installer: Option<Box<Installer>>,
}

/// Where a new interpreter's IPython layer comes from: looked up only when
/// one starts.
pub(crate) struct IpythonFrom<'a> {
    pub envs: &'a Envs,
    /// Tells the caller of a build of the layer.
    pub progress: &'a (dyn Fn(String) + Send + Sync),
}

/// A call's result, with what happened to the interpreter.
#[derive(Debug)]
pub(crate) struct LiveRun {
    pub end: CellEnd,
    pub interpreter: Interpreter,
    /// In allowlist mode, what the code reached and what was refused.
    pub network: Option<NetworkReport>,
}

impl Interpreters {
    /// Runs `call` in the session's interpreter, starting one when it has
    /// none (or must replace it), and reports which.
    pub(crate) async fn run(
        &self,
        policy: &Policy,
        session: &Session,
        call: LiveCall<'_>,
        out: OutputTx,
        cancel: &CancellationToken,
    ) -> Result<LiveRun, StartError> {
        let LiveCall {
            req,
            lease,
            ipython,
            net,
            env_change,
            installed,
            installer,
        } = call;
        let slot = self.slot(session);
        let mut guard = slot.live.lock().await;
        let limits = policy.job_limits(&req.limits);
        let unfit = guard
            .as_mut()
            .and_then(|live| unfit(live, req, &lease.key, &limits, net))
            .map(|why| match (&env_change, why) {
                (Some((instead, _)), ResetReason::RequirementsChanged) => *instead,
                _ => why,
            });
        let in_place = match guard.as_mut() {
            Some(live) if unfit == Some(ResetReason::FreshRequested) => {
                self.fresh_in_place((&slot, session), live, (&lease.key, &limits, net))
                    .await
            }
            _ => None,
        };
        if unfit.is_some() && in_place.is_none() {
            retire(&slot, &mut guard);
        }
        let got = match (in_place, guard.as_ref()) {
            (Some(got), _) => got,
            (None, Some(live)) => Got::kept(live),
            (None, None) => {
                // Only a new interpreter needs the layer: a kept one's call
                // never waits for it, nor for a build of it that fails.
                let ipython = tokio::select! {
                    k = IpythonLayer::get(policy, ipython.envs, ipython.progress) => k,
                    _ = cancel.cancelled() => {
                        return Err(StartError::NotReady("the call was cancelled".into()))
                    }
                };
                let (live, got) = self
                    .replace(policy, session, &slot, req, (lease, ipython), unfit)
                    .await?;
                *guard = Some(live);
                got
            }
        };
        let first = slot.meta().cells == 0;
        let (state, reason) = reported(first, session.ran_before_restart, got.reason);
        let Some(live) = guard.as_mut() else {
            return Err(StartError::NotReady("no interpreter".into()));
        };
        if live.batch && !req.fresh {
            super::start::promote(live);
        }
        let grace = policy.interpreters.interrupt_grace.0;
        let cell = CellCall {
            req,
            limits: &limits,
            grace,
            net,
            installer: installer.as_deref(),
        };
        let ends = cell::Ends {
            cancel,
            stop: &self.stopping,
        };
        let (end, network) = run_cell(live, cell, out, ends).await?;
        after_cell(&slot, &mut guard, &end);
        let (restored, not_restored) = carried_report(got.carried);
        Ok(LiveRun {
            interpreter: Interpreter {
                state,
                reason,
                warm: got.warm,
                saved_at: got.saved_at,
                last_run_lost: false,
                result: end.result.clone(),
                result_truncated: end.result_truncated,
                restored,
                not_restored,
                reason_message: env_change
                    .filter(|(r, _)| Some(*r) == reason)
                    .map(|(_, m)| m),
                installed,
            },
            end,
            network,
        })
    }

    /// A new interpreter for the session, whose last one (if any) is gone:
    /// room made for it under the caps, started, and given what a stop
    /// saved. The reason it is new: `fresh` first, then why the last one
    /// was unfit for this call, then why a stop or a death ended it.
    async fn replace(
        &self,
        policy: &Policy,
        session: &Session,
        slot: &Arc<Slot>,
        req: &RunRequest,
        (lease, ipython): (EnvLease, Option<IpythonLayer>),
        unfit: Option<ResetReason>,
    ) -> Result<(Live, Got), StartError> {
        let pending = slot.meta().next_reason.take();
        // `fresh` means a clean interpreter, whatever a stop saved.
        let reason = if req.fresh {
            Some(ResetReason::FreshRequested)
        } else {
            unfit.or(pending)
        };
        self.make_room(policy, session.tenant.as_deref(), slot);
        let mut live = self
            .start_in(policy, session, (lease, ipython), req.limits, req.fresh)
            .await?;
        let carry = std::mem::take(&mut slot.meta().carry);
        let saved_at = saved_at(&carry);
        let carried = carry_over(&mut live, carry, req.fresh).await;
        self.forget_unless_restored(session, &carried);
        slot.meta().kill = Some(live.kill.clone());
        let got = Got {
            reason,
            warm: false,
            saved_at: saved_at.filter(|_| restored(&carried)),
            carried,
        };
        Ok((live, got))
    }
}

impl Interpreters {
    /// A new interpreter in the session's jail, running `lease`'s
    /// environment with `ipython`, started with `limits` (batch CPU weight
    /// when `batch`): forked from the template when one is up.
    pub(super) async fn start_in(
        &self,
        policy: &Policy,
        session: &Session,
        (lease, ipython): (EnvLease, Option<IpythonLayer>),
        limits: prims_protocol::jail::LimitRequest,
        batch: bool,
    ) -> Result<Live, StartError> {
        let spec = StartSpec {
            name: self.jails.names.interpreter(&session.name),
            interpreter: self.interpreter.clone(),
            workspace: session.workspace.clone(),
            host_uid: session.host_uid,
            venv: lease.dir.clone(),
            env_key: lease.key.clone(),
            lease: Some(lease),
            limits,
            prewarm: Vec::new(),
            ipython,
            warm: false,
            batch,
            fork: Default::default(),
            agent: self.agent.clone(),
        };
        super::fork::start(
            Some(&self.templates),
            &self.jails,
            Some(&self.egress),
            policy,
            spec,
        )
        .await
    }

    /// A fresh python in the jail of `live`, for a `fresh: true` call that
    /// it fits otherwise; `None` if it cannot be had (the caller then
    /// starts a new interpreter, as for any `fresh` call).
    async fn fresh_in_place(
        &self,
        (slot, session): (&Slot, &Session),
        live: &mut Live,
        (env_key, limits, net): (&str, &JobLimits, Option<&NetCall>),
    ) -> Option<Got> {
        if !live.can_be_fresh_in_place() || unfit_for(live, env_key, limits, net).is_some() {
            return None;
        }
        if let Err(e) = live.fresh_in_place().await {
            tracing::info!(job = %live.job, error = %e, "no fresh python in place; starting a new interpreter");
            return None;
        }
        self.templates.count_in_place();
        slot.meta().next_reason = None;
        let carry = std::mem::take(&mut slot.meta().carry);
        let carried = carry_over(live, carry, true).await;
        self.forget_unless_restored(session, &carried);
        Some(Got {
            reason: Some(ResetReason::FreshRequested),
            warm: false,
            saved_at: None,
            carried,
        })
    }
}

/// How a call came by its interpreter.
struct Got {
    /// Why it is not the one the session's last call ran in.
    reason: Option<ResetReason>,
    /// It came from the warm pool and runs its first cell.
    warm: bool,
    /// What a stop saved, restored into it (or why not).
    carried: Option<Result<Carried, String>>,
    /// When the globals it restored were saved (Unix seconds), when known.
    saved_at: Option<u64>,
}

impl Got {
    fn kept(live: &Live) -> Got {
        Got {
            reason: None,
            warm: live.warm && live.cells == 0,
            carried: None,
            saved_at: None,
        }
    }
}

impl Interpreters {
    /// A new interpreter that restored nothing of the last save (a
    /// `fresh: true` call, a reset, a save that failed): no restart may
    /// bring that save back over what the session does from now on.
    fn forget_unless_restored(&self, session: &Session, carried: &Option<Result<Carried, String>>) {
        if !restored(carried) {
            self.sessions.forget_saved_globals(session);
        }
    }
}

/// Something of a save came back.
fn restored(carried: &Option<Result<Carried, String>>) -> bool {
    matches!(carried, Some(Ok(c)) if !c.names.is_empty())
}

fn saved_at(carry: &Carry) -> Option<u64> {
    match carry {
        Carry::Saved { at, .. } => *at,
        _ => None,
    }
}

/// Why the session's interpreter cannot serve this call, in order of
/// precedence: the call asks `fresh`, or for other requirements, other
/// memory or process limits, or another network mode; or the interpreter
/// died.
fn unfit(
    live: &mut Live,
    req: &RunRequest,
    env_key: &str,
    limits: &JobLimits,
    net: Option<&NetCall>,
) -> Option<ResetReason> {
    if req.fresh {
        Some(ResetReason::FreshRequested)
    } else {
        unfit_for(live, env_key, limits, net)
    }
}

/// Why the session's interpreter cannot serve a call, `fresh` aside.
fn unfit_for(
    live: &mut Live,
    env_key: &str,
    limits: &JobLimits,
    net: Option<&NetCall>,
) -> Option<ResetReason> {
    if live.env_key != env_key {
        Some(ResetReason::RequirementsChanged)
    } else if live.held != HeldLimits::from(limits) {
        Some(ResetReason::LimitsChanged)
    } else if live.egress.is_some() != net.is_some() {
        Some(ResetReason::NetworkChanged)
    } else if !live.is_alive() {
        Some(ResetReason::CodeExited)
    } else {
        None
    }
}

/// Sends the slot's interpreter away; dropping it kills its jail.
fn retire(slot: &Slot, live: &mut Option<Live>) {
    *live = None;
    slot.meta().kill = None;
}

/// What the call is told of its interpreter: new on the session's first
/// call, reset on its first call since the supervisor restarted (a session
/// that ran code, or a branch that never did but holds globals saved
/// before the restart, which `reason` then says), else reset for
/// `reason`, or kept.
fn reported(
    first: bool,
    ran_before_restart: bool,
    reason: Option<ResetReason>,
) -> (InterpreterState, Option<ResetReason>) {
    let restarted = ran_before_restart || reason == Some(ResetReason::ServerRestarted);
    if first && !restarted {
        (InterpreterState::New, Some(ResetReason::FirstCall))
    } else if first {
        (InterpreterState::Reset, Some(ResetReason::ServerRestarted))
    } else {
        match reason {
            Some(r) => (InterpreterState::Reset, Some(r)),
            None => (InterpreterState::Kept, None),
        }
    }
}

/// The call's code as one cell in `live`, inside a run of the egress
/// proxy (allowlist mode), whose record is the call's network report.
/// A cell to run, and what it runs under.
struct CellCall<'a> {
    req: &'a RunRequest,
    limits: &'a JobLimits,
    grace: Duration,
    net: Option<&'a NetCall>,
    installer: Option<&'a Installer>,
}

async fn run_cell(
    live: &mut Live,
    cell: CellCall<'_>,
    out: OutputTx,
    ends: cell::Ends<'_>,
) -> Result<(CellEnd, Option<NetworkReport>), StartError> {
    let CellCall {
        req,
        limits,
        grace,
        net,
        installer,
    } = cell;
    let proxied = match (&live.egress, net) {
        (Some(jail), Some(n)) => match jail.begin(&n.rules, n.budget).await {
            Ok(run) => Some(run),
            Err(e) => return Err(StartError::NotReady(format!("the egress proxy: {e}"))),
        },
        _ => None,
    };
    if let Some(n) = net {
        if let Err(e) = live.set_secret_env(&n.secret_env).await {
            if let (Some(run), Some(jail)) = (proxied, &live.egress) {
                jail.end(run).await;
            }
            return Err(StartError::NotReady(format!(
                "the session's secrets could not be set in its interpreter: {e}"
            )));
        }
    }
    let end = cell::run(live, req.code.clone(), limits, grace, out, ends, installer).await;
    let network = match (proxied, &live.egress) {
        (Some(run), Some(jail)) => {
            let mut report = jail.end(run).await;
            report.ignored = net.map(|n| n.ignored.clone()).unwrap_or_default();
            Some(report)
        }
        _ => None,
    };
    Ok((end, network))
}

/// The slot after a cell: one more cell, used now, its memory measured;
/// an interpreter that ended in the cell goes, and the next call is told
/// why.
fn after_cell(slot: &Slot, live: &mut Option<Live>, end: &CellEnd) {
    {
        let mut m = slot.meta();
        m.cells += 1;
        m.last_used = Instant::now();
        if let Some(l) = live.as_ref() {
            m.memory = l.memory_bytes().unwrap_or(m.memory);
        }
        if let Some(gone) = end.gone {
            m.next_reason = Some(gone);
            m.kill = None;
        }
    }
    if end.gone.is_some() {
        *live = None;
    } else {
        super::autosave::changed(slot);
    }
}

/// What the stop left, carried into `live`, the session's next interpreter:
/// nothing when the call asked for `fresh` (saved globals are deleted
/// unread, so none of their code runs again).
async fn carry_over(live: &mut Live, carry: Carry, fresh: bool) -> Option<Result<Carried, String>> {
    match carry {
        Carry::Nothing => None,
        Carry::Saved { .. } if fresh => {
            if let Err(e) = live.discard().await {
                tracing::warn!(job = %live.job, error = %e, "could not delete saved globals");
            }
            None
        }
        Carry::Lost(_) if fresh => None,
        Carry::Saved { unsaved, .. } => Some(
            live.restore()
                .await
                .map(|mut c| {
                    c.missed.splice(0..0, unsaved);
                    c
                })
                .map_err(|e| e.to_string()),
        ),
        Carry::Lost(why) => Some(Ok(Carried {
            names: Vec::new(),
            missed: vec![Named {
                name: "*".into(),
                why,
            }],
        })),
    }
}

fn carried_report(c: Option<Result<Carried, String>>) -> (Vec<String>, Vec<NotRestored>) {
    match c {
        None => (Vec::new(), Vec::new()),
        Some(Ok(c)) => (c.names, c.missed.into_iter().map(Into::into).collect()),
        Some(Err(e)) => (
            Vec::new(),
            vec![NotRestored {
                name: "*".into(),
                why: format!("the saved state could not be restored: {e}"),
            }],
        ),
    }
}
