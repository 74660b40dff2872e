//! A session's workspace files as MCP resources, named
//! `prims://sessions/{session_id}/{+path}` ([`mod@uri`]). Reads go through the
//! supervisor like every tool's, so the same rules hold: the caller's
//! tenant must own the session, and no path leaves the workspace or follows
//! a symlink out of it. [`list`] walks the caller's current session,
//! [`read`] answers text or base64, and [`watch`] turns runs into
//! `notifications/resources/updated`.

pub mod activity;
pub mod handlers;
pub mod list;
pub mod read;
pub mod uri;
pub mod watch;

pub use uri::{parse, uri, TEMPLATE};
