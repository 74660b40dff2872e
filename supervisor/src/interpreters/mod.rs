//! Live interpreters. Each session's calls run in one Python interpreter
//! that lives in the session's jail between calls, so variables, imports
//! and functions persist; a warm pool of whole spare sessions, each with an
//! interpreter that already imported `python.prewarm_imports`, serves new
//! sessions.
//!
//! - [`agent`]: the in-jail agent, which runs cells in one persistent
//!   globals dict;
//! - [`channel`]: the supervisor's side of its framed channel, a trust
//!   boundary: code in the jail can write anything to it;
//! - [`output`]: cutting the jail's stdout and stderr into cells at the
//!   markers the agent writes, which `pumps` applies to the live pipes;
//! - `start`, `live`, `cell`: starting one interpreter, and one call in it,
//!   whose end `settled` confirms from the kernel's view of python;
//! - `call`: one call in the session's interpreter, in phases, and why
//!   the interpreter is kept or replaced;
//! - [`fork`]: the fork wing: fork templates, and a `fresh: true` call's
//!   fresh python forked in place of a forked interpreter's, in the same
//!   jail; `fork::start` chooses fork or cold for every start;
//! - `registry`, `slot`, `pool`: the interpreters by session, the caps,
//!   the idle stop and the warm pool.

pub(crate) mod agent;
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
mod settled;
mod slot;
pub(crate) mod start;

#[cfg(test)]
mod agent_tests;

pub(crate) use call::{IpythonFrom, LiveCall, LiveRun};
pub(crate) use registry::Interpreters;
pub(crate) use slot::SessionRequirements;
