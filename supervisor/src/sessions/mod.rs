//! Sessions: workspaces, metadata, quotas, uids, expiry, recovery.
//!
//! On disk, under `state_dir/sessions/` (0711, root):
//! - `<name>/`: the workspace the jail binds at /workspace, holding
//!   `output/` and `mounts/`, all owned by the session's host uid. In loop
//!   mode it is the mount point of the session's quota image.
//! - `<name>.img`: the ext4 quota image (loop mode only).
//! - `<name>.json`: the metadata, written atomically, never inside the
//!   workspace, which jailed code controls.
//!
//! A session id is 128 bits from getrandom as 32 lowercase hex characters;
//! ids from callers are checked for exactly that. The id is a capability
//! and is never stored: `<name>` is its keyed hash (see `key`), and only the
//! caller that opened the session knows the id. Every call names the tenant
//! it acts for; another tenant's session looks like a missing one.
//! The API is synchronous and some calls (create, close, open, sweep) take
//! tens of milliseconds: call them through `spawn_blocking`.

mod error;
mod key;
mod layout;
mod meta;
mod migrate;
mod recover;
mod session;
mod shared;
mod store;
mod uids;

pub use error::SessionError;
pub use key::{SessionKey, KEY_FILE};
pub use meta::is_valid_id;
pub use session::Session;
pub use store::{SessionStore, Spare};

use prims_policy::{Policy, SessionQuota};
use std::time::Duration;

/// How a workspace's disk quota is enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaMode {
    /// A sparse ext4 image of `disk_quota` bytes per session, loop-mounted
    /// on the workspace: writing past it fails with ENOSPC.
    Loop,
    /// A plain directory; the quota is not enforced and reported as 0.
    None,
}

impl From<SessionQuota> for QuotaMode {
    fn from(q: SessionQuota) -> Self {
        match q {
            SessionQuota::Loop => QuotaMode::Loop,
            SessionQuota::None => QuotaMode::None,
        }
    }
}

/// The part of the policy the session store uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionPolicy {
    /// A session unused for longer than this is closed by `sweep`.
    pub idle_ttl: Duration,
    /// Bytes per workspace, for sessions created from now on.
    pub disk_quota: u64,
    pub max_sessions: usize,
    /// Sessions get host uids from `[uid_base, uid_base + uid_count - 1)`;
    /// the last uid of the range is kept for environment builds.
    pub uid_base: u32,
    pub uid_count: u32,
    pub quota: QuotaMode,
    /// Free disk a new session never takes.
    pub min_free_disk: u64,
}

impl From<&Policy> for SessionPolicy {
    fn from(p: &Policy) -> Self {
        SessionPolicy {
            idle_ttl: p.sessions.idle_ttl.0,
            disk_quota: p.sessions.disk_quota.0,
            max_sessions: p.sessions.max_sessions as usize,
            uid_base: p.identity.uid_base,
            uid_count: p.identity.uid_count,
            quota: p.sessions.quota.into(),
            min_free_disk: p.sessions.min_free_disk.0,
        }
    }
}
