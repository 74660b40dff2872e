//! Live interpreters: one long-lived Python per session, run inside that
//! session's jail. The in-jail agent ([`agent`]) runs cells in one
//! persistent globals dict; [`channel`] is the supervisor's side of its
//! framed, hostile channel; [`output`] cuts the jail's stdout and stderr
//! into cells at the markers the agent writes.

// The actor, pool and registry that use these parts land separately; until
// then only the tests call them.
#![allow(dead_code)]

pub(crate) mod agent;
pub(crate) mod channel;
pub(crate) mod output;

#[cfg(test)]
mod agent_tests;
