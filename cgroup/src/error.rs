//! One error variant per failing operation, each naming the path and the
//! errno so that an operator can act on the message alone.

use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("cannot statfs /sys/fs/cgroup to detect the cgroup mode: {source}")]
    Detect {
        #[source]
        source: io::Error,
    },
    #[error(
        "/sys/fs/cgroup has filesystem magic {magic:#x}, neither cgroup2 (v2) nor tmpfs (v1/hybrid); \
         mount cgroups or set the cgroup backend to none"
    )]
    UnknownMode { magic: u64 },
    #[error("cannot read {path}: {source}")]
    ReadFile {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot write {value:?} to {path}: {source}")]
    WriteFile {
        path: PathBuf,
        value: String,
        #[source]
        source: io::Error,
    },
    #[error(
        "limit file {path} does not exist: its controller is not enabled for this cgroup \
         (v2: check the parent's cgroup.subtree_control; v1: check the hierarchy is mounted)"
    )]
    LimitFileMissing { path: PathBuf },
    #[error("cannot parse {path}: {what}")]
    Parse { path: PathBuf, what: String },
    #[error("cannot create cgroup directory {path}: {source}")]
    CreateDir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "job cgroup {path} already exists (left over by a crashed run?); remove it with remove_job first"
    )]
    JobExists { path: PathBuf },
    #[error(
        "job cgroup {path} does not exist (or is not a directory): the job was never created, \
         or it was removed"
    )]
    NoSuchJob { path: PathBuf },
    #[error("cannot open cgroup directory {path}: {source}")]
    OpenDir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot remove cgroup directory {path}: {source}")]
    Rmdir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cgroup directory {path} is still busy after {waited_ms} ms: processes or child cgroups remain")]
    RmdirBusy { path: PathBuf, waited_ms: u64 },
    #[error("cannot list cgroup directory {path}: {source}")]
    ListDir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot signal pid {pid} in the job cgroup: {source}")]
    Signal {
        pid: libc::pid_t,
        #[source]
        source: io::Error,
    },
    #[error("processes {pids:?} still in {path} after {waited_ms} ms of SIGKILL")]
    KillTimeout {
        path: PathBuf,
        pids: Vec<libc::pid_t>,
        waited_ms: u64,
    },
    #[error(
        "no cgroup {kind} hierarchy with controller {controller:?} in /proc/self/mountinfo; \
         mount it or choose the other cgroup backend"
    )]
    NoMount { controller: String, kind: String },
    #[error("/proc/self/cgroup has no entry for controller {controller:?}")]
    NoOwnCgroup { controller: String },
    #[error(
        "cgroup path {path:?} is not reachable through the mount of {controller:?} (mount root {mount_root:?}); \
         use a parent inside the mounted subtree"
    )]
    OutsideMount {
        controller: String,
        path: String,
        mount_root: String,
    },
    #[error("bad cgroup parent {parent:?}: {reason}")]
    BadParent { parent: String, reason: String },
    #[error("cgroup {path} cannot host job cgroups: {hint}")]
    NotDelegated { path: PathBuf, hint: String },
    #[error("bad cgroup name {name:?}: it must match [A-Za-z0-9_-]{{1,64}}")]
    BadJobName { name: String },
    #[error("the parent map for cgroup {version} lacks the key {key:?}")]
    MissingParent { version: &'static str, key: String },
    #[error("the parent map for cgroup {version} has the unexpected key {key:?}")]
    UnexpectedParent { version: &'static str, key: String },
    #[error("{path} is not on a cgroup {version} filesystem (magic {magic:#x})")]
    NotCgroupFs {
        path: PathBuf,
        version: &'static str,
        magic: u64,
    },
    #[error("bad limit {field} = {value}: {reason}")]
    BadLimit {
        field: &'static str,
        value: u64,
        reason: &'static str,
    },
}

impl CgroupError {
    /// The errno behind this error, when there is one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            CgroupError::Detect { source }
            | CgroupError::ReadFile { source, .. }
            | CgroupError::WriteFile { source, .. }
            | CgroupError::CreateDir { source, .. }
            | CgroupError::OpenDir { source, .. }
            | CgroupError::Rmdir { source, .. }
            | CgroupError::ListDir { source, .. }
            | CgroupError::Signal { source, .. } => source.raw_os_error(),
            CgroupError::LimitFileMissing { .. } => Some(libc::ENOENT),
            CgroupError::JobExists { .. } => Some(libc::EEXIST),
            CgroupError::NoSuchJob { .. } => Some(libc::ENOENT),
            CgroupError::RmdirBusy { .. } => Some(libc::EBUSY),
            _ => None,
        }
    }
}
