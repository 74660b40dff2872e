//! What both managers implement: the cgroup version, the manager of job
//! cgroups under the parents, and one job's cgroup.

use crate::error::CgroupError;
use crate::limits::{Limits, Usage};
use crate::peak::PeakMeter;
use crate::priority::CpuPriority;
use std::os::fd::BorrowedFd;
use std::path::PathBuf;

/// The cgroup mode of the host. Hybrid hosts count as V1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    V1,
    V2,
}

impl Version {
    /// `"v1"` or `"v2"`, as reported in outcomes.
    pub fn as_str(self) -> &'static str {
        match self {
            Version::V1 => "v1",
            Version::V2 => "v2",
        }
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Creates, opens, lists and removes job cgroups under the parent(s).
/// `Send + Sync` so that a supervisor can keep managers and jobs in async
/// tasks.
pub trait Manager: std::fmt::Debug + Send + Sync {
    fn version(&self) -> Version;
    /// Create `<parent>/<name>` in every hierarchy and write `limits`
    /// before returning. `name` must match `[A-Za-z0-9_-]{1,64}`. Refuses
    /// an existing job directory; on failure nothing is left behind.
    fn create_job(&self, name: &str, limits: &Limits) -> Result<Box<dyn JobCgroup>, CgroupError>;
    /// The existing job `name` (created by a jailer), to act on it while
    /// it lives. Refuses a job that is missing, in any of the hierarchies
    /// on v1, with [`CgroupError::NoSuchJob`]; never creates anything.
    fn open_job(&self, name: &str) -> Result<Box<dyn JobCgroup>, CgroupError>;
    /// Job directories left under the parent(s), for crash clean-up.
    fn list_jobs(&self) -> Result<Vec<String>, CgroupError>;
    /// Kill everything in the job, then remove its directories. A job that
    /// does not exist is not an error.
    fn remove_job(&self, name: &str) -> Result<(), CgroupError>;
}

/// One job's cgroup (one directory per hierarchy on v1).
pub trait JobCgroup: std::fmt::Debug + Send + Sync {
    /// Move `pid` (a whole process) into the job.
    fn attach(&self, pid: libc::pid_t) -> Result<(), CgroupError>;
    /// v2 only: an `O_DIRECTORY|O_CLOEXEC` fd of the job directory, for
    /// `clone3(CLONE_INTO_CGROUP)`.
    fn dir_fd(&self) -> Option<BorrowedFd<'_>>;
    /// Current figures; absent optional files give `None`. Reads four
    /// small files (v1: memory.max_usage_in_bytes, memory.usage_in_bytes,
    /// memory.oom_control, cpuacct.usage; v2: memory.peak,
    /// memory.current, memory.events, cpu.stat).
    fn usage(&self) -> Result<Usage, CgroupError>;
    /// Rewrite the memory, swap, pids and CPU limits of a live job, with
    /// the same strings as `create_job`. Lowering memory below what the
    /// job uses: v1 refuses with EBUSY (an error whose `errno()` says so;
    /// limits written before the refused file stay), v2 reclaims and then
    /// OOM-kills the job (`memory.oom.group`), like a limit hit.
    fn set_limits(&self, limits: &Limits) -> Result<(), CgroupError>;
    /// Start measuring peak memory from now. v1: resets
    /// `memory.max_usage_in_bytes` (and `memory.memsw.max_usage_in_bytes`
    /// when present) for the whole cgroup, so [`JobCgroup::usage`]'s peak
    /// restarts too. v2: writes `reset` to its own open file description
    /// of `memory.peak` (Linux 6.12+, local to that description); older
    /// kernels refuse, and the meter reports the job's lifetime peak
    /// ([`PeakMeter::since_start`]).
    fn start_peak(&self) -> Result<PeakMeter, CgroupError>;
    /// How the job competes for CPU with other cgroups. v2: `cpu.idle`
    /// where the kernel has it (5.15+), else `cpu.weight`; v1:
    /// `cpu.shares`. The CPU bandwidth limit (`set_limits`) still applies.
    fn set_cpu_priority(&self, priority: CpuPriority) -> Result<(), CgroupError>;
    /// SIGKILL everything in the job and wait (bounded, ~2 s) until it is
    /// empty. v2 uses `cgroup.kill` where the kernel has it.
    fn kill(&self) -> Result<(), CgroupError>;
    /// rmdir every directory (and any child cgroup), retrying on EBUSY for
    /// about 2 s.
    fn destroy(self: Box<Self>) -> Result<(), CgroupError>;
    /// Whether swap is limited too (v1: `memory.memsw.*`, v2:
    /// `memory.swap.max` exist).
    fn enforces_swap(&self) -> bool;
    /// The job's directories.
    fn paths(&self) -> Vec<PathBuf>;
}
