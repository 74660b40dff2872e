//! The policy file's shape. Every table denies unknown keys so a typo is an
//! error instead of a silently ignored limit, and every field has a default so
//! an empty file is a complete policy.

use crate::units::{ByteSize, HumanDuration};
use prims_protocol::jail::{CgroupBackend, NetworkMode};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

mod allow;
mod branches;
mod secrets;
mod tasks;
pub use allow::{Allowed, Tls};
pub use branches::Branches;
pub use secrets::{Secret, SecretKind, SecretSource};
pub use tasks::Tasks;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Policy {
    pub limits: Limits,
    pub network: Network,
    pub filesystem: Filesystem,
    pub seccomp: Seccomp,
    pub landlock: Landlock,
    pub cgroup: Cgroup,
    pub identity: Identity,
    pub python: Python,
    pub sessions: Sessions,
    pub interpreters: Interpreters,
    pub egress: Egress,
    pub tasks: Tasks,
    pub branches: Branches,
    /// Credentials the egress proxy places for jailed code, by the name of
    /// the environment variable that holds each one's placeholder.
    pub secrets: BTreeMap<String, Secret>,
}

/// Per-run ceilings; a request can only lower them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    pub wall_time: HumanDuration,
    pub cpu_time: HumanDuration,
    pub memory: ByteSize,
    pub swap: ByteSize,
    pub pids: u64,
    pub open_files: u64,
    pub file_size: ByteSize,
    pub output_bytes: ByteSize,
    pub tmp_size: ByteSize,
    /// `None` means one run per available core.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_concurrent_runs: Option<usize>,
    /// `None` means twice `max_concurrent_runs`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_concurrent_fresh_runs: Option<usize>,
    /// Runs that may wait for a slot; more are refused as busy.
    pub max_queued_runs: usize,
    /// CPU bandwidth in cores.
    pub cpus: f64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            wall_time: HumanDuration::secs(30),
            cpu_time: HumanDuration::secs(20),
            memory: ByteSize::mib(512),
            swap: ByteSize(0),
            pids: 64,
            open_files: 256,
            file_size: ByteSize::mib(64),
            output_bytes: ByteSize::mib(1),
            tmp_size: ByteSize::mib(64),
            max_concurrent_runs: None,
            max_concurrent_fresh_runs: None,
            max_queued_runs: 64,
            cpus: 1.0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Network {
    pub mode: NetworkPolicy,
    /// What jailed code may reach in `allowlist` mode; see
    /// [`crate::network`] for the entries. An entry is the host text, or
    /// a table `{ host, tls }` for one whose TLS is tunnelled
    /// (`tls = "passthrough"`) instead of inspected.
    pub allow: Vec<Allowed>,
    /// PEM files of roots the egress proxy trusts for upstreams, besides
    /// the system's.
    pub upstream_ca: Vec<PathBuf>,
    /// Ports of the entries that name none.
    pub ports: Vec<u16>,
    /// Bytes one run may move through the proxy, both directions.
    pub max_bytes: ByteSize,
    /// Connections one run may open through the proxy.
    pub max_connections: u32,
    /// Narrower lists for tenants (the front-end's token names): a tenant
    /// named here gets only what both its list and `allow` permit.
    pub tenants: BTreeMap<String, Vec<String>>,
}

impl Default for Network {
    fn default() -> Self {
        Network {
            mode: NetworkPolicy::None,
            allow: Vec::new(),
            upstream_ca: Vec::new(),
            ports: vec![80, 443],
            max_bytes: ByteSize::mib(256),
            max_connections: 64,
            tenants: BTreeMap::new(),
        }
    }
}

impl Network {
    /// The allow-list's entries as written, tables' hosts included.
    pub fn allow_entries(&self) -> Vec<String> {
        self.allow.iter().map(|a| a.host.clone()).collect()
    }
}

/// The ways out user code may have. Every jail has a loopback of its own
/// (TCP and UDP over IPv4 and IPv6 on `lo`, in its own network namespace),
/// whatever the mode: servers, `multiprocessing` managers and local
/// clusters run unchanged, and reach nothing outside the jail. The jailer's
/// `host` mode, used for environment builds, is deliberately not
/// expressible here.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NetworkPolicy {
    /// No way out: the jail's own loopback only.
    #[default]
    None,
    /// The older name of `none`, from when `none` left `lo` down; kept so
    /// that such policies still load.
    Loopback,
    /// The jail's own loopback, plus the egress proxy as the only way out.
    Allowlist,
}

impl From<NetworkPolicy> for NetworkMode {
    fn from(p: NetworkPolicy) -> Self {
        match p {
            NetworkPolicy::None | NetworkPolicy::Loopback => NetworkMode::Loopback,
            NetworkPolicy::Allowlist => NetworkMode::Proxy,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Filesystem {
    /// Host paths bound read-only at the same path in the jail.
    pub ro_binds: Vec<PathBuf>,
    /// Interpreter name (as callers ask for it) to host binary.
    pub interpreters: BTreeMap<String, PathBuf>,
    pub default_interpreter: String,
}

impl Default for Filesystem {
    fn default() -> Self {
        Filesystem {
            ro_binds: ["/usr", "/lib", "/lib64", "/bin"]
                .into_iter()
                .map(PathBuf::from)
                .collect(),
            interpreters: BTreeMap::from([(
                "3.11".to_string(),
                PathBuf::from("/usr/bin/python3.11"),
            )]),
            default_interpreter: "3.11".to_string(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Seccomp {
    /// Syscall names denied with EPERM on top of the jailer's built-in list.
    pub extra_deny: Vec<String>,
    pub socket_families: Vec<SocketFamily>,
}

impl Default for Seccomp {
    fn default() -> Self {
        Seccomp {
            extra_deny: Vec::new(),
            socket_families: vec![SocketFamily::Unix],
        }
    }
}

/// The socket families a policy may allow; anything else (raw, netlink,
/// packet...) is kernel attack surface the jail never needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum SocketFamily {
    #[serde(rename = "AF_UNIX")]
    Unix,
    #[serde(rename = "AF_INET")]
    Inet,
    #[serde(rename = "AF_INET6")]
    Inet6,
}

impl SocketFamily {
    pub fn number(self) -> i32 {
        match self {
            SocketFamily::Unix => libc::AF_UNIX,
            SocketFamily::Inet => libc::AF_INET,
            SocketFamily::Inet6 => libc::AF_INET6,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Landlock {
    /// Refuse to run when the kernel cannot enforce Landlock.
    pub required: bool,
}

impl Default for Landlock {
    fn default() -> Self {
        Landlock { required: true }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Cgroup {
    pub backend: CgroupBackend,
    /// Relative to the supervisor's own cgroup, or absolute from the root.
    pub parent: String,
}

impl Default for Cgroup {
    fn default() -> Self {
        Cgroup {
            backend: CgroupBackend::Auto,
            parent: "prims".to_string(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Identity {
    /// Jail uid 1000 maps to a host uid in `[uid_base, uid_base + uid_count)`.
    pub uid_base: u32,
    pub uid_count: u32,
}

impl Default for Identity {
    fn default() -> Self {
        Identity {
            uid_base: 200_000,
            uid_count: 65_536,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Python {
    pub default_packages: Vec<String>,
    /// Empty means uv's default index.
    pub index_url: String,
    pub extra_index_urls: Vec<String>,
    pub find_links: Vec<String>,
    /// Wheels only, so no package build script runs at install time.
    pub only_binary: bool,
    pub env_cache_bytes: ByteSize,
    /// Disk for uv's shared package cache; oldest entries go above it.
    pub cache_bytes: ByteSize,
    /// Wall-clock time one environment build may take.
    pub build_timeout: HumanDuration,
    /// Memory one environment build may use.
    pub build_memory: ByteSize,
    /// Disk one build may write (its staging volume, reserved up front).
    pub build_disk: ByteSize,
    /// Modules the warm pool's interpreters import before any session
    /// claims them, so a first call that uses them pays nothing.
    pub prewarm_imports: Vec<String>,
    /// Python each warm-pool spare runs while it waits, in a namespace of
    /// its own with its output discarded: the first use of a module in an
    /// interpreter forked from a template copies the pages it touches, and
    /// this pays for the common ones before a session claims the spare.
    pub warm_up_code: String,
    /// The IPython layer: packages every interpreter sees after its own
    /// environment's, which give cells notebook semantics (IPython runs
    /// them) and plots. Built once, like an environment. Empty: no layer.
    /// (Earlier versions called it `kernel_packages`, which is still read.)
    #[serde(alias = "kernel_packages")]
    pub ipython_packages: Vec<String>,
    /// A directory of packages to use as the IPython layer instead of
    /// building `ipython_packages` (an offline host's, made with `pip
    /// install --target`). (Earlier versions called it `kernel_site`, which
    /// is still read.)
    #[serde(skip_serializing_if = "Option::is_none", alias = "kernel_site")]
    pub ipython_site: Option<std::path::PathBuf>,
}

/// Builds, sums and prints a small frame and an array, as most first
/// calls with pandas and numpy do; only with what the prewarm imports
/// brought in, so it imports nothing itself.
pub const DEFAULT_WARM_UP_CODE: &str = "import sys\npd, np = sys.modules.get('pandas'), sys.modules.get('numpy')\nif pd:\n    f = pd.DataFrame({'n': [1, 2], 'x': [0.5, 1.5], 'k': ['a', 'b']})\n    f.n.sum(); f.x.mean(); str(f)\nif np:\n    np.arange(6).reshape(2, 3).sum(axis=0)\n";

impl Default for Python {
    fn default() -> Self {
        Python {
            default_packages: ["pandas", "openpyxl", "requests"]
                .into_iter()
                .map(String::from)
                .collect(),
            index_url: String::new(),
            extra_index_urls: Vec::new(),
            find_links: Vec::new(),
            only_binary: true,
            env_cache_bytes: ByteSize::gib(10),
            cache_bytes: ByteSize::gib(4),
            build_timeout: HumanDuration::secs(600),
            build_memory: ByteSize::gib(2),
            build_disk: ByteSize::gib(4),
            prewarm_imports: ["pandas", "numpy"].into_iter().map(String::from).collect(),
            warm_up_code: DEFAULT_WARM_UP_CODE.to_string(),
            ipython_packages: ["ipython", "matplotlib", "matplotlib-inline", "cloudpickle"]
                .into_iter()
                .map(String::from)
                .collect(),
            ipython_site: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Sessions {
    pub idle_ttl: HumanDuration,
    pub disk_quota: ByteSize,
    pub max_sessions: u32,
    /// How `disk_quota` is enforced.
    pub quota: SessionQuota,
    /// Free disk that new sessions never take: one is refused when the free
    /// space minus this cannot hold its quota.
    pub min_free_disk: ByteSize,
    /// Runs a session's notebook keeps; past it the oldest are dropped.
    pub history_cells: u32,
    /// Bytes of recorded runs a session keeps (code, text, outputs); past
    /// it the oldest are dropped.
    pub history_bytes: ByteSize,
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions {
            idle_ttl: HumanDuration::secs(3600),
            disk_quota: ByteSize::gib(1),
            max_sessions: 256,
            quota: SessionQuota::Loop,
            min_free_disk: ByteSize::gib(1),
            history_cells: 500,
            history_bytes: ByteSize::mib(16),
        }
    }
}

/// Live interpreters: one per session, kept between calls, plus a pool of
/// warm ones for new sessions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Interpreters {
    /// An interpreter unused for this long is stopped (its picklable state
    /// is saved into the workspace and restored on the next call).
    pub idle_ttl: HumanDuration,
    /// Live interpreters on this host; past it, the least recently used is
    /// stopped.
    pub max_live: u32,
    /// Live interpreters of one tenant; past it, that tenant's least
    /// recently used is stopped.
    pub max_live_per_tenant: u32,
    /// Warm sessions kept ready, each a workspace with a jailed interpreter
    /// that imported `python.prewarm_imports`. 0 disables the pool.
    pub pool_size: u32,
    /// How long interrupted code may take to stop after a time limit before
    /// its interpreter is killed.
    pub interrupt_grace: HumanDuration,
    /// How long saving an interpreter's globals at a stop may take (it
    /// runs the objects' own pickling code); past it they are lost.
    pub save_timeout: HumanDuration,
    /// A session whose globals changed is saved in the background this
    /// long after its first unsaved call (between calls, at idle CPU
    /// priority), so that a crash loses at most that much; 0 turns it off.
    pub autosave_after: HumanDuration,
    /// Fork new interpreters from a per-environment template that imported
    /// `python.prewarm_imports` once (see the architecture guide's "Fork
    /// templates"); the default environment's template starts with the
    /// server. Off (for a host that cannot fork), every interpreter starts
    /// cold.
    pub fork_templates: bool,
    /// Templates kept at once, one per environment; past it, the least
    /// recently used is replaced.
    pub max_templates: u32,
    /// Memory (and swap) limit of one template's cgroup.
    pub template_memory: ByteSize,
    /// A template older than this is replaced by a fresh one (which also
    /// re-randomizes the address layout and hash secret its children
    /// share); it forks until its successor is up.
    pub template_max_age: HumanDuration,
    /// A template that has forked this many children is replaced the same
    /// way.
    pub template_max_children: u64,
}

impl Default for Interpreters {
    fn default() -> Self {
        Interpreters {
            idle_ttl: HumanDuration::secs(600),
            max_live: 32,
            max_live_per_tenant: 8,
            pool_size: 2,
            interrupt_grace: HumanDuration::secs(2),
            save_timeout: HumanDuration::secs(10),
            autosave_after: HumanDuration::secs(10),
            fork_templates: true,
            max_templates: 4,
            template_memory: ByteSize(1 << 30),
            template_max_age: HumanDuration::secs(3600),
            template_max_children: 1000,
        }
    }
}

/// How a session workspace's disk quota is enforced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionQuota {
    /// Each workspace is its own ext4 image, allocated in full and
    /// loop-mounted: a hard quota that never overcommits the disk.
    #[default]
    Loop,
    /// A plain directory with no quota, for hosts without loop devices.
    None,
}

/// Outbound HTTP of the MCP front-end (`mount_file`, `run_code` files,
/// `persist_artifact`). Private, loopback, link-local and metadata addresses
/// are refused unless `allow` names them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Egress {
    /// Hostnames, IP addresses or CIDRs exempt from the address guard; see
    /// [`crate::EgressRule`].
    pub allow: Vec<String>,
    pub max_download: ByteSize,
    pub max_upload: ByteSize,
    /// Connect timeout, and the total time of one transfer.
    pub timeout: HumanDuration,
}

impl Default for Egress {
    fn default() -> Self {
        Egress {
            allow: Vec::new(),
            max_download: ByteSize::mib(256),
            max_upload: ByteSize::mib(20),
            timeout: HumanDuration::secs(60),
        }
    }
}
