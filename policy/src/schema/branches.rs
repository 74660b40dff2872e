//! `[branches]`: forks of a live session and its checkpoints. A fork's
//! sessions count against every session quota like any other; checkpoints
//! are kept on the supervisor's disk, bounded per session and per tenant.

use crate::units::ByteSize;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Branches {
    /// Sessions one `fork_session` may make.
    pub max_forks: u32,
    /// Checkpoints one session may keep.
    pub max_checkpoints: u32,
    /// Bytes of checkpoints (globals and files) one session may keep.
    pub max_checkpoint_bytes: ByteSize,
    /// Checkpoints one tenant may keep, all its sessions together.
    pub max_checkpoints_per_tenant: u32,
    /// Bytes of checkpoints one tenant may keep.
    pub max_checkpoint_bytes_per_tenant: ByteSize,
}

impl Default for Branches {
    fn default() -> Self {
        Branches {
            max_forks: 8,
            max_checkpoints: 16,
            max_checkpoint_bytes: ByteSize::gib(2),
            max_checkpoints_per_tenant: 64,
            max_checkpoint_bytes_per_tenant: ByteSize::gib(8),
        }
    }
}
