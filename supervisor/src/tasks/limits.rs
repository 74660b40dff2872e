//! The budgets of kept tasks, as the policy's `[tasks]` sets them.

use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskLimits {
    /// When the client names none.
    pub default_ttl: Duration,
    /// The longest a client may ask for.
    pub max_ttl: Duration,
    /// Tasks one tenant may have kept, working or finished.
    pub max_tasks_per_tenant: usize,
    /// Bytes of finished results one tenant may have kept.
    pub max_result_bytes_per_tenant: usize,
    /// Tasks kept, all tenants together.
    pub max_tasks: usize,
    /// Bytes of finished results kept, all tenants together.
    pub max_result_bytes: usize,
}

impl From<&prims_policy::Tasks> for TaskLimits {
    fn from(t: &prims_policy::Tasks) -> Self {
        let bytes = |b: prims_policy::ByteSize| usize::try_from(b.bytes()).unwrap_or(usize::MAX);
        TaskLimits {
            default_ttl: t.default_ttl.get(),
            max_ttl: t.max_ttl.get(),
            max_tasks_per_tenant: t.max_tasks_per_tenant as usize,
            max_result_bytes_per_tenant: bytes(t.max_result_bytes_per_tenant),
            max_tasks: t.max_tasks as usize,
            max_result_bytes: bytes(t.max_result_bytes),
        }
    }
}

impl Default for TaskLimits {
    /// The policy's defaults.
    fn default() -> Self {
        TaskLimits::from(&prims_policy::Tasks::default())
    }
}
