//! A session's workspace files as MCP resources, named
//! `prims://sessions/{session_id}/{+path}` ([`crate::uri`]). Reads go
//! through the supervisor like every tool's, so the same rules hold: the
//! caller's tenant must own the session, and no path leaves the workspace or
//! follows a symlink out of it. [`list`] walks the caller's current session,
//! [`read`] answers text or base64, and [`handlers`] are the MCP methods on
//! top of them and of [`crate::watch`], which turns runs into
//! `notifications/resources/updated`.

mod handlers;
mod list;
mod read;
