//! A session's interpreter as a fork or a checkpoint needs it: held (its
//! calls wait) while its globals are saved into its own workspace, by its
//! own agent; and a branch's interpreter (or a rolled-back session's)
//! started and given globals, which its own agent unpickles in its own
//! jail. No process outside a jail ever unpickles anything.

use super::channel::Named;
use super::ipython::IpythonLayer;
use super::live::{AskError, Carried, HeldLimits, Live};
use super::registry::Interpreters;
use super::slot::{Carry, SessionRequirements, Slot};
use super::start::StartError;
use crate::envs::EnvLease;
use crate::sessions::Session;
use prims_policy::Policy;
use prims_protocol::jail::LimitRequest;
use prims_protocol::wire::ResetReason;
use std::sync::Arc;
use tokio::sync::OwnedMutexGuard;

/// Where a fork or a checkpoint has the agent save the globals, inside
/// the jail.
const BRANCH_FILE: &str = "/workspace/.prims/branch.pickle";
/// How long a rollback waits for the replaced interpreter's jail to end.
const JAIL_END_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
/// The same file from the workspace root.
pub(crate) const BRANCH_REL: &str = ".prims/branch.pickle";
/// Where a stop saved the globals, from the workspace root.
pub(crate) const STATE_REL: &str = ".prims/state.pickle";
/// What a copy of a session's files leaves out: saved globals, which
/// travel on their own.
pub(crate) const SAVED_GLOBALS: [&str; 4] = [
    ".prims/state.pickle",
    ".prims/state.pickle.tmp",
    ".prims/branch.pickle",
    ".prims/branch.pickle.tmp",
];

/// A session held for a fork or a checkpoint: its calls (and stops) wait
/// until this is dropped.
pub(crate) struct Held {
    _guard: OwnedMutexGuard<Option<Live>>,
    /// The file that holds its globals, from the workspace root, if any.
    pub globals: Option<&'static str>,
    /// What could not be saved, with why.
    pub unsaved: Vec<Named>,
    /// What a branch's interpreter starts as.
    pub profile: Profile,
}

/// What a session's interpreter runs in and with: a branch's starts the
/// same, so that the branch's calls keep it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Profile {
    pub requirements: Option<SessionRequirements>,
    pub asked: LimitRequest,
    /// Cells the session ran.
    pub cells: u64,
}

impl Profile {
    /// The slot's, with `live` its interpreter (if it has one).
    fn of(slot: &Slot, live: Option<&Live>) -> Profile {
        let m = slot.meta();
        Profile {
            requirements: m.requirements.clone(),
            asked: live.map(|l| l.asked).unwrap_or_default(),
            cells: m.cells,
        }
    }
}

impl Held {
    fn new(
        guard: OwnedMutexGuard<Option<Live>>,
        globals: Option<&'static str>,
        unsaved: Vec<Named>,
        profile: Profile,
    ) -> Held {
        Held {
            _guard: guard,
            globals,
            unsaved,
            profile,
        }
    }
}

impl Interpreters {
    /// Holds the session and has its agent save its globals, within
    /// `interpreters.save_timeout`. A session with no interpreter gives
    /// what its last stop saved. A save that fails or runs out of time
    /// stops the interpreter (its agent may still be pickling): the
    /// session's next call gets a new one, and the error says so.
    /// With `check` (a checkpoint), a value that pickles but fails to load
    /// again is named with the rest of what was not saved.
    pub(crate) async fn hold(
        &self,
        policy: &Policy,
        session: &Session,
        check: bool,
    ) -> Result<Held, String> {
        let slot = self.slot(session);
        let mut guard = slot.live.clone().lock_owned().await;
        let profile = Profile::of(&slot, guard.as_ref());
        let alive = guard.as_mut().is_some_and(|l| l.is_alive());
        let live = match guard.as_mut() {
            Some(live) if alive => live,
            _ => {
                // Stopped: what the stop saved, if anything, is in the
                // workspace, and stays there for the session's next call.
                let (globals, unsaved) = match &slot.meta().carry {
                    Carry::Saved { unsaved, .. } => (Some(STATE_REL), unsaved.clone()),
                    Carry::Lost(why) => (
                        None,
                        vec![Named {
                            name: "*".into(),
                            why: why.clone(),
                        }],
                    ),
                    Carry::Nothing => (None, Vec::new()),
                };
                return Ok(Held::new(guard, globals, unsaved, profile));
            }
        };
        if live.cells == 0 {
            return Ok(Held::new(guard, None, Vec::new(), profile));
        }
        let timeout = policy.interpreters.save_timeout.0;
        match live.save_to(BRANCH_FILE, (false, check), timeout).await {
            Ok(c) => Ok(Held::new(guard, Some(BRANCH_REL), c.missed, profile)),
            // The agent answered in turn: its channel is sound, and the
            // session goes on as it was.
            Err(AskError::Refused(why)) => Err(format!(
                "saving the session's globals failed ({why}); the session is unchanged"
            )),
            Err(e) => {
                let reason = match e {
                    AskError::Timeout(_) => ResetReason::TimedOut,
                    _ => ResetReason::ChannelBroken,
                };
                *guard = None;
                let mut m = slot.meta();
                m.kill = None;
                m.next_reason = Some(reason);
                Err(format!(
                    "saving the session's globals failed ({e}); its interpreter was \
                     stopped, and its next call starts a new one"
                ))
            }
        }
    }

    /// Gives the session (a branch, or one rolled back) an interpreter
    /// like `profile`'s and has it restore the globals the caller put in
    /// its workspace's state file (`unsaved` are named as not restored).
    /// A pool spare it already holds serves if it fits; else one starts
    /// in `env` (the lease of `profile`'s requirements) with `ipython`.
    pub(crate) async fn give(
        &self,
        policy: &Policy,
        session: &Session,
        profile: &Profile,
        (env, ipython): (EnvLease, Option<IpythonLayer>),
        unsaved: Vec<Named>,
    ) -> Result<Carried, StartError> {
        let slot = self.slot(session);
        let mut guard = slot.live.clone().lock_owned().await;
        let limits = policy.job_limits(&profile.asked);
        let fits = guard.as_mut().is_some_and(|l| {
            l.is_alive() && l.env_key == env.key && l.held == HeldLimits::from(&limits)
        });
        if !fits {
            *guard = None;
            self.make_room(policy, session.tenant.as_deref(), &slot);
            let live = self
                .start_in(policy, session, (env, ipython), profile.asked, false)
                .await?;
            *guard = Some(live);
        }
        let Some(live) = guard.as_mut() else {
            return Err(StartError::NotReady("no interpreter".into()));
        };
        let carried = live.restore().await;
        // It holds the session's globals now: a stop saves them.
        live.cells = live.cells.max(1);
        let mut m = slot.meta();
        m.kill = Some(live.kill.clone());
        m.carry = Carry::Nothing;
        m.next_reason = None;
        m.cells = m.cells.max(profile.cells).max(1);
        if m.requirements.is_none() {
            m.requirements = profile.requirements.clone();
        }
        m.last_used = std::time::Instant::now();
        drop(m);
        let mut c = carried.map_err(|e| StartError::NotReady(format!("restoring globals: {e}")))?;
        c.missed.splice(0..0, unsaved);
        Ok(c)
    }

    /// The session's interpreter goes (a rollback replaces it): its jail
    /// is killed and has ended when this returns, and what a stop left is
    /// forgotten. What it was, for the one that replaces it.
    pub(crate) async fn drop_interpreter(&self, session: &Session) -> Profile {
        let slot: Arc<Slot> = self.slot(session);
        let mut guard = slot.live.lock().await;
        let profile = Profile::of(&slot, guard.as_ref());
        if let Some(live) = guard.take() {
            // Its processes must not write into the files being replaced.
            live.end(JAIL_END_WAIT).await;
        }
        let mut m = slot.meta();
        m.kill = None;
        m.carry = Carry::Nothing;
        profile
    }

    /// What the session's interpreter is, or would be: its branches' new
    /// sessions are chosen by it before the session is held.
    pub(crate) async fn profile(&self, session: &Session) -> Profile {
        let slot = self.slot(session);
        let guard = slot.live.lock().await;
        Profile::of(&slot, guard.as_ref())
    }

    /// The session's branches take a pool spare only if it is what a new
    /// interpreter of `profile` would be: the default environment's, with
    /// the default limits.
    pub(crate) fn spare_fits(&self, profile: &Profile) -> bool {
        profile.asked == LimitRequest::default()
            && profile
                .requirements
                .as_ref()
                .is_none_or(|r| r.base.is_empty())
    }
}
