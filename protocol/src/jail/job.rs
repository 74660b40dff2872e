use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Everything a jailer needs to run one job. Paths are host paths.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// Absolute host path of the interpreter binary the venv points at.
    pub interpreter: PathBuf,
    /// Host path of the venv, mounted read-only at `/venv`.
    pub venv: PathBuf,
    /// Host path of the session workspace, mounted read-write at `/workspace`.
    pub workspace: PathBuf,
    /// Python source, passed to `python -I -c`.
    pub code: String,
    pub limits: JobLimits,
    #[serde(default)]
    pub network: NetworkMode,
    /// Host paths bound read-only at the same path inside the jail. A symlink
    /// (such as `/lib` on merged-usr hosts) is recreated as a symlink.
    pub ro_binds: Vec<PathBuf>,
    /// Extra syscall names denied with EPERM on top of the built-in list.
    #[serde(default)]
    pub seccomp_extra_deny: Vec<String>,
    /// Socket address families the code may create (numeric `AF_*`).
    pub socket_families: Vec<i32>,
    /// Fail with a setup error when the kernel cannot enforce Landlock fully.
    pub landlock_required: bool,
    pub cgroup: CgroupSpec,
    /// Host uid and gid that jail uid/gid 1000 map to. Never 0.
    pub host_uid: u32,
    pub host_gid: u32,
    /// Run this program (absolute path inside the jail, then its arguments)
    /// instead of `python -I -u -c code`. Environment builds use it for uv.
    #[serde(default)]
    pub argv: Vec<String>,
    /// Extra `KEY=VALUE` environment entries for the program.
    #[serde(default)]
    pub env: Vec<String>,
    /// Extra binds, e.g. uv and its cache for an environment build.
    #[serde(default)]
    pub binds: Vec<Bind>,
    /// Mount the venv read-write: only for building it.
    #[serde(default)]
    pub venv_writable: bool,
    /// With `NetworkMode::Proxy`: the loopback port, inside the jail, of
    /// the listener the jail's init hands to the caller.
    #[serde(default)]
    pub proxy_port: u16,
    /// How the job competes for CPU against other jobs. The supervisor
    /// raises it to normal through the job's cgroup when a pooled or batch
    /// interpreter goes on to serve a session's calls. No effect without a
    /// cgroup.
    #[serde(default)]
    pub cpu: CpuClass,
    /// Whether this job is a fork template, a child forked from one, or
    /// neither (a cold jail).
    #[serde(default)]
    pub fork: ForkRole,
}

/// A job's CPU weight against other jobs.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CpuClass {
    /// The kernel's default weight: a session's calls.
    #[default]
    Normal,
    /// A tenth of it: a `fresh: true` run, which yields to sessions' calls
    /// without starving.
    Batch,
    /// CPU only when nothing else wants it: a warm-pool refill, so that
    /// refills never slow running calls.
    Idle,
}

/// A job's part in fork templates (see the architecture guide's "Fork
/// templates").
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ForkRole {
    /// A cold jail.
    #[default]
    None,
    /// A template: its user namespace also maps the host uids
    /// `[children_uid_base, +children_uid_count)` (at jail uids from
    /// [`TEMPLATE_CHILD_UIDS`]), so a child's namespace can map one of them.
    Template {
        children_uid_base: u32,
        children_uid_count: u32,
    },
    /// A child forked from the template whose python has host pid
    /// `template_python`: the jailer adopts it (`--adopt-fd`) rather than
    /// starting python.
    Child { template_python: u32 },
}

/// The venv's python, as every jail sees it.
pub const VENV_PYTHON: &str = "/venv/bin/python";

/// inotify instances one jail may hold at once: its user namespace's own
/// ceiling (`/proc/sys/user/max_inotify_instances`), which its init sets.
pub const JAIL_INOTIFY_INSTANCES: u64 = 64;

/// inotify watches one jail may hold at once (`max_inotify_watches`).
pub const JAIL_INOTIFY_WATCHES: u64 = 8192;

/// Signals one jail may have queued at once (`RLIMIT_SIGPENDING`). The
/// kernel counts them per user up the user-namespace chain as well, so
/// the children of one fork template share a ceiling of the template's:
/// this share is small enough that every child a policy allows fits
/// under a host's default ceiling (`interpreters::fork::budgets`).
pub const JAIL_PENDING_SIGNALS: u64 = 256;

/// Where a template's user namespace maps the children's host uid range.
pub const TEMPLATE_CHILD_UIDS: u32 = 100_000;

/// A host directory bound at `target` inside the jail.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Bind {
    pub source: PathBuf,
    /// Absolute path inside the jail, outside `/proc`, `/dev` and `/workspace`.
    pub target: PathBuf,
    pub writable: bool,
}

/// Limits as plain numbers, already merged with policy.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct JobLimits {
    pub wall_time_ms: u64,
    pub cpu_time_ms: u64,
    pub memory_bytes: u64,
    pub swap_bytes: u64,
    pub pids: u64,
    pub open_files: u64,
    pub file_size_bytes: u64,
    pub output_bytes: u64,
    pub tmp_size_bytes: u64,
    /// CPU bandwidth in thousandths of a core (1000 = one core).
    pub cpu_millis: u64,
}

/// What a caller may ask for. Every field can only lower the policy limit.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct LimitRequest {
    pub wall_time_ms: Option<u64>,
    pub cpu_time_ms: Option<u64>,
    pub memory_bytes: Option<u64>,
    pub pids: Option<u64>,
    pub output_bytes: Option<u64>,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum NetworkMode {
    /// An empty network namespace, `lo` down and no TCP: for the jobs that
    /// run no user code (a fork template, an offline bytecode compile).
    #[default]
    None,
    /// `lo` is up, TCP and UDP on it; nothing leaves the namespace. What
    /// every run of user code gets at least.
    Loopback,
    /// As `Loopback`, and a TCP listener on `127.0.0.1:proxy_port` inside
    /// the jail is handed out (over the jailer's `--proxy-fd`) before any
    /// code runs: its connections are served by a proxy outside the jail,
    /// the only way out.
    Proxy,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum CgroupBackend {
    #[default]
    Auto,
    V1,
    V2,
    None,
}

/// Where the job cgroup goes. The caller resolved and prepared the parent
/// directories; the jailer creates `<parent>/<job>` in each, enforces limits
/// through it and removes it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct CgroupSpec {
    /// `v1`, `v2` or `none`; `auto` is resolved by the caller.
    pub backend: CgroupBackend,
    /// Controller name (`memory`, `pids`, `cpu`, `cpuacct`; `unified` for v2)
    /// to the absolute parent directory.
    #[serde(default)]
    pub parents: BTreeMap<String, PathBuf>,
    /// Name of the job's cgroup directory: `[A-Za-z0-9_-]{1,64}`.
    pub job: String,
}
