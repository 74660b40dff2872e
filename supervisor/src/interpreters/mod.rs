//! Live interpreters. Each session's calls run in one Python interpreter
//! that lives in the session's jail between calls, so variables, imports
//! and functions persist; a warm pool of whole spare sessions, each with an
//! interpreter that already imported `python.prewarm_imports`, serves new
//! sessions.
//!
//! The modules, in the order a call meets them:
//!
//! - [`agent`]: the in-jail agent (the `prims_agent` Python package), its
//!   read-only directory and the limits it keeps;
//! - [`channel`]: the supervisor's side of its framed channel, a trust
//!   boundary: code in the jail can write anything to it;
//! - [`ipython`]: the IPython layer an interpreter's cells run through;
//! - `registry`, `slot`, `pool`: the interpreters by session, the caps,
//!   the idle stop and the warm pool; `autosave`: each session's globals
//!   saved in the background after calls changed them, for a crash;
//! - `call`: one call in the session's interpreter, in phases, and why
//!   the interpreter is kept or replaced;
//! - [`fork`]: the fork wing: every start goes through `fork::start`,
//!   which forks a new interpreter from a fork template or starts it cold;
//!   a `fresh: true` call's fresh python forked in place;
//! - [`start`]: starting one interpreter cold, and what a forked start
//!   shares with it (the agent's spec, the jail's launch, `ready`);
//! - [`live`]: one running interpreter, and what a stop saves of it;
//! - [`cell`]: one cell, with its limits; [`install`] serves its
//!   `%pip install`; `settled` confirms from the Linux kernel's view of
//!   python that it has ended;
//! - [`output`], `pumps`: the jail's stdout and stderr, cut into cells at
//!   the markers the agent writes;
//! - `enforced`: what enforces each limit, as the outcome reports it.

pub(crate) mod agent;
mod autosave;
pub(crate) mod branch;
mod call;
pub(crate) mod cell;
pub(crate) mod channel;
mod enforced;
pub(crate) mod fork;
pub(crate) mod install;
pub(crate) mod ipython;
pub(crate) mod live;
pub(crate) mod output;
mod pool;
mod pumps;
mod registry;
mod saves;
mod settled;
mod slot;
pub(crate) mod start;

#[cfg(test)]
mod agent_tests;

pub(crate) use call::{IpythonFrom, LiveCall, LiveRun};
pub(crate) use registry::Interpreters;
pub(crate) use slot::SessionRequirements;
