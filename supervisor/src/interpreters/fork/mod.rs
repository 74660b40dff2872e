//! The fork wing: interpreters forked from a fork template rather than
//! started cold (the architecture guide's "Fork templates" and "Fresh in
//! place"). [`start`] is the one place that chooses fork or cold, and
//! counts which.
//!
//! - [`templates`]: per environment and IPython layer, a jailed python that
//!   imported the prewarm set once and answers only `fork` frames; started
//!   with the server for the default environment, and on first use for
//!   others;
//! - [`parent`]: the socket to a forked python's parent, outside its jail;
//! - [`in_place`]: a `fresh: true` call's fresh python, forked by that
//!   parent in place of the one it replaces, in the same jail;
//! - [`budgets`]: the host's per-user ceilings that every child of a
//!   template would share, raised so that none binds before a jail's own.
//!
//! Their in-jail half is the agent's `prims_agent/fork/` package
//! (`template.py`, `parent.py`); the jailer's half, which adopts a
//! template's child, is `prims-jailer`'s `adopt` module; the messages
//! between the three are `prims_protocol::fork`'s.

pub(crate) mod budgets;
pub(crate) mod in_place;
pub(crate) mod parent;
pub(crate) mod templates;

use super::live::Live;
use super::start::{self, StartError, StartSpec};
use crate::egress::EgressProxy;
use crate::job::Jails;
use parent::Parent;
use prims_policy::Policy;
use prims_protocol::jail::ForkRole;
use std::sync::Arc;
use std::time::Instant;
use templates::{Forked, Templates};

/// Starts the interpreter of `s`: forked from its environment's template
/// when `templates` is given, the policy's switch is on and a template is
/// up for it; cold otherwise, and when the fork or the adoption fails (the
/// call still gets its interpreter). Every start is counted by its path.
pub(crate) async fn start(
    templates: Option<&Arc<Templates>>,
    jails: &Jails,
    egress: Option<&Arc<EgressProxy>>,
    policy: &Policy,
    s: StartSpec,
) -> Result<Live, StartError> {
    let Some(templates) = templates else {
        return start::start(jails, egress, policy, s).await;
    };
    let mut s = s;
    if policy.interpreters.fork_templates {
        if let Some(forked) = templates.fork(jails, policy, &s).await {
            match adopt(jails, egress, policy, s, forked).await {
                Ok(live) => {
                    templates.count_start(true);
                    return Ok(live);
                }
                Err((e, back)) => {
                    tracing::warn!(job = %back.name, error = %e,
                        "a forked interpreter did not start; starting it cold");
                    s = back;
                    // The failed start's jailer removes its job cgroup as
                    // it ends, which may be after the cold start begins.
                    s.name = jails.names.again(&s.name);
                }
            }
        }
    }
    let live = start::start(jails, egress, policy, s).await;
    if live.is_ok() {
        templates.count_start(false);
    }
    live
}

/// Starts the interpreter of `s` by adopting `forked`, a template's child;
/// `s` comes back on failure, for a cold start.
async fn adopt(
    jails: &Jails,
    egress: Option<&Arc<EgressProxy>>,
    policy: &Policy,
    s: StartSpec,
    forked: Forked,
) -> Result<Live, (StartError, StartSpec)> {
    let t0 = Instant::now();
    let mut spec = start::agent_spec(jails, policy, &s);
    spec.fork = ForkRole::Child {
        template_python: forked.template_python,
    };
    match start::launch(jails, egress, &spec, &s, Some(forked.adopt), t0).await {
        Ok(l) => {
            let parent = Parent::new(forked.fresh, l.python_dir());
            let mut live = l.into_live(s, &spec);
            live.forked = true;
            match parent {
                Ok(p) => live.parent = Some(p),
                Err(e) => {
                    tracing::warn!(job = %live.job, error = %e, "a forked interpreter cannot be replaced in place")
                }
            }
            Ok(live)
        }
        Err(e) => Err((e, s)),
    }
}
