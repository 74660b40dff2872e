//! `[branches]`: forks of a live session and its checkpoints. A fork's
//! sessions count against every session quota like any other; checkpoints
//! are kept on the supervisor's disk, bounded per session, per tenant and
//! on the whole node, in bytes and in inodes.

use crate::units::ByteSize;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Branches {
    /// Sessions one `fork_session` may make. A fork is refused too when the
    /// source and its branches could not all be live at once
    /// (`interpreters.max_live_per_tenant`).
    pub max_forks: u32,
    /// Checkpoints one session may keep.
    pub max_checkpoints: u32,
    /// Bytes of checkpoints (globals and files) one session may keep.
    pub max_checkpoint_bytes: ByteSize,
    /// Inodes (files, directories, symlinks, FIFOs) of checkpoints one
    /// session may keep.
    pub max_checkpoint_inodes: u64,
    /// Checkpoints one tenant may keep, all its sessions together.
    pub max_checkpoints_per_tenant: u32,
    /// Bytes of checkpoints one tenant may keep.
    pub max_checkpoint_bytes_per_tenant: ByteSize,
    /// Inodes of checkpoints one tenant may keep.
    pub max_checkpoint_inodes_per_tenant: u64,
    /// Bytes of checkpoints this node keeps, every tenant's together.
    pub max_checkpoint_bytes_total: ByteSize,
    /// Inodes of checkpoints this node keeps, every tenant's together.
    pub max_checkpoint_inodes_total: u64,
}

/// Bytes per inode that mke2fs gives a default ext4 filesystem (a 1 GiB
/// session workspace has 65,536 inodes): the inode defaults keep that
/// ratio to the byte defaults, so a checkpoint of a workspace filled with
/// inodes costs its budgets what one filled with bytes does.
const BYTES_PER_INODE: u64 = 16 << 10;

impl Default for Branches {
    fn default() -> Self {
        let (session, tenant, total) = (ByteSize::gib(2), ByteSize::gib(8), ByteSize::gib(32));
        Branches {
            max_forks: 4,
            max_checkpoints: 16,
            max_checkpoint_bytes: session,
            max_checkpoint_inodes: session.0 / BYTES_PER_INODE,
            max_checkpoints_per_tenant: 64,
            max_checkpoint_bytes_per_tenant: tenant,
            max_checkpoint_inodes_per_tenant: tenant.0 / BYTES_PER_INODE,
            max_checkpoint_bytes_total: total,
            max_checkpoint_inodes_total: total.0 / BYTES_PER_INODE,
        }
    }
}
