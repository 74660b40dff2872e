//! `[tasks]`: runs started as MCP tasks, whose results wait in the
//! supervisor's memory until the client polls for them.

use crate::units::{ByteSize, HumanDuration};
use serde::{Deserialize, Serialize};

/// What the supervisor keeps of tasks. Every tenant (a bearer token's
/// tenant; without tokens, all clients are one tenant) has its own budget,
/// so one tenant's tasks only ever push out that tenant's own results. The
/// server-wide ceilings bound the memory however many tenants there are:
/// at them, a new task is refused as busy unless the tenant has a finished
/// task of its own to drop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Tasks {
    /// How long a finished task is kept when the client names no TTL,
    /// counted from its creation.
    pub default_ttl: HumanDuration,
    /// The longest TTL a client may ask for.
    pub max_ttl: HumanDuration,
    /// Tasks one tenant may have kept, working or finished.
    pub max_tasks_per_tenant: u32,
    /// Bytes of finished results one tenant may have kept.
    pub max_result_bytes_per_tenant: ByteSize,
    /// Tasks kept on this host, all tenants together.
    pub max_tasks: u32,
    /// Bytes of finished results kept on this host, all tenants together.
    pub max_result_bytes: ByteSize,
}

impl Default for Tasks {
    fn default() -> Self {
        Tasks {
            default_ttl: HumanDuration::secs(3600),
            max_ttl: HumanDuration::secs(24 * 3600),
            max_tasks_per_tenant: 256,
            max_result_bytes_per_tenant: ByteSize::mib(16),
            max_tasks: 1024,
            max_result_bytes: ByteSize::mib(64),
        }
    }
}
