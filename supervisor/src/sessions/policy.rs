//! The part of the policy the session store works to: quotas, the uid
//! range, caps and expiry.

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
    /// Runs, and bytes of them, a session's history keeps.
    pub history_cells: usize,
    pub history_bytes: u64,
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
            history_cells: p.sessions.history_cells as usize,
            history_bytes: p.sessions.history_bytes.0,
        }
    }
}
