//! One variant per failing step, each carrying the errno the kernel gave,
//! rendered as a message an operator can act on.

use nix::errno::Errno;
use prims_protocol::jail::SetupError;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum JailError {
    #[error("{0}")]
    Spec(String),
    #[error("{what} {path} does not exist or is not usable: {errno}")]
    Input {
        what: &'static str,
        path: PathBuf,
        errno: Errno,
    },
    #[error("stdout and stderr must be pipes or files, not a terminal")]
    Terminal,
    #[error("{0}")]
    Cgroup(#[from] prims_cgroup::CgroupError),
    #[error("pipe: {0}")]
    Pipe(Errno),
    #[error("clone into new namespaces failed: {0}{hint}", hint = clone_hint(*.0))]
    Clone(Errno),
    #[error("taking the job's host ids as the user namespace's owner ({call}): {errno}")]
    CloneIdentity { call: &'static str, errno: Errno },
    #[error("writing {file} for the jail failed: {errno}")]
    IdMap { file: String, errno: Errno },
    #[error("dropping supplementary groups failed: {0}")]
    Setgroups(Errno),
    #[error("the jail's init exited during setup without a report")]
    ChildLost,
    #[error("waiting for the jail: {0}")]
    Wait(Errno),
    #[error("child setup: {0}")]
    Child(String),
    // Steps inside the jail's init.
    #[error("parent-death signal: {0}")]
    Pdeathsig(Errno),
    #[error("the jailer exited before the jail was released")]
    ParentGone,
    #[error("joining the job cgroup through {path}: {errno}")]
    CgroupSelfAttach { path: PathBuf, errno: Errno },
    #[error("new cgroup namespace: {0}")]
    UnshareCgroup(Errno),
    #[error("setsid: {0}")]
    Setsid(Errno),
    #[error("making mounts private: {0}")]
    MakePrivate(Errno),
    #[error("opening {path}: {errno}{hint}", hint = open_hint(*errno))]
    OpenSource { path: PathBuf, errno: Errno },
    #[error("{path} must be a directory")]
    NotADirectory { path: PathBuf },
    #[error("switching to the jail's filesystem identity: {0}")]
    SetFsId(Errno),
    #[error("mounting a tmpfs on {target}: {errno}")]
    MountTmpfs { target: String, errno: Errno },
    #[error("creating {path}: {errno}")]
    Mkdir { path: String, errno: Errno },
    #[error("binding {src} on {target}: {errno}")]
    Bind {
        src: String,
        target: String,
        errno: Errno,
    },
    #[error("making {target} read-only: {errno}")]
    Remount { target: String, errno: Errno },
    #[error("creating symlink {path}: {errno}")]
    Symlink { path: String, errno: Errno },
    #[error("writing {path}: {errno}")]
    WriteFile { path: String, errno: Errno },
    #[error("removing {path}: {errno}")]
    Remove { path: String, errno: Errno },
    #[error("getrandom: {0}")]
    Random(Errno),
    #[error("mounting /proc: {0}{hint}", hint = proc_hint(*.0))]
    MountProc(Errno),
    #[error("setting the jail's own {path}: {errno}")]
    UserNsLimit { path: String, errno: Errno },
    #[error("pivot_root: {0}")]
    PivotRoot(Errno),
    #[error("detaching the host root: {0}")]
    DetachOldRoot(Errno),
    #[error("chdir {path}: {errno}")]
    Chdir { path: String, errno: Errno },
    #[error("bringing lo up: {0}")]
    LoopbackUp(Errno),
    #[error("the proxy listener on 127.0.0.1:{port}: {what}: {errno}")]
    ProxyListener {
        port: u16,
        what: &'static str,
        errno: Errno,
    },
    #[error("sethostname: {0}")]
    Hostname(Errno),
    #[error("setrlimit {resource}: {errno}")]
    Rlimit {
        resource: &'static str,
        errno: Errno,
    },
    #[error("dropping capabilities: {0}")]
    CapDrop(String),
    #[error("setresgid: {0}")]
    SetGid(Errno),
    #[error("setresuid: {0}")]
    SetUid(Errno),
    #[error("no_new_privs: {0}")]
    NoNewPrivs(Errno),
    #[error("kernel has no Landlock and policy requires it (set landlock.required = false to run without it)")]
    LandlockUnsupported,
    #[error("{0}")]
    Landlock(String),
    #[error("{0}")]
    Seccomp(String),
    #[error("fork: {0}")]
    Fork(Errno),
    #[error("exec {path}: {errno}")]
    Exec { path: String, errno: Errno },
    #[error("laying out the fds python inherits ({call}): {errno}")]
    PythonFds { call: &'static str, errno: Errno },
    #[error("unblocking python's signals: {0}")]
    Signals(Errno),
    // Adopting a template's forked child.
    #[error("the template's child: {0}")]
    AdoptPeer(String),
    #[error("the template's child: {call}: {errno}")]
    AdoptCall { call: &'static str, errno: Errno },
    #[error("pid {pid} is not a child of the template's python (pid {template})")]
    NotTemplateChild { pid: i32, template: u32 },
    #[error("joining the child's {ns} namespace: {errno}")]
    Setns { ns: &'static str, errno: Errno },
    #[error("a pid namespace for the template's child: {0}")]
    UnsharePid(Errno),
    #[error("cloning the workspace mount ({path}): {errno}")]
    OpenTree { path: PathBuf, errno: Errno },
    #[error("attaching {target}: {errno}")]
    MoveMount { target: String, errno: Errno },
}

impl JailError {
    /// The setup step, as named in outcome records.
    pub fn step(&self) -> &'static str {
        use JailError::*;
        match self {
            Spec(_) => "spec",
            Input { .. } => "input",
            Terminal => "stdio",
            Cgroup(_) | CgroupSelfAttach { .. } => "cgroup",
            Pipe(_) => "pipe",
            Clone(_) | CloneIdentity { .. } => "clone",
            IdMap { .. } | Setgroups(_) => "idmap",
            ChildLost | Wait(_) | Child(_) | ParentGone | Pdeathsig(_) => "init",
            Setsid(_) => "setsid",
            UnshareCgroup(_) => "clone",
            MakePrivate(_) | OpenSource { .. } | NotADirectory { .. } | SetFsId(_) => "mounts",
            MountTmpfs { .. } | Mkdir { .. } | Bind { .. } | Remount { .. } => "mounts",
            Symlink { .. } | WriteFile { .. } | Remove { .. } | Random(_) | MountProc(_) => {
                "mounts"
            }
            PivotRoot(_) | DetachOldRoot(_) | Chdir { .. } => "pivot_root",
            LoopbackUp(_) | ProxyListener { .. } => "network",
            Hostname(_) => "hostname",
            Rlimit { .. } | UserNsLimit { .. } => "rlimits",
            CapDrop(_) | SetGid(_) | SetUid(_) | NoNewPrivs(_) => "privileges",
            LandlockUnsupported | Landlock(_) => "landlock",
            Seccomp(_) => "seccomp",
            Fork(_) => "fork",
            Exec { .. } | PythonFds { .. } | Signals(_) => "exec",
            AdoptPeer(_) | AdoptCall { .. } | NotTemplateChild { .. } => "adopt",
            Setns { .. } | UnsharePid(_) => "clone",
            OpenTree { .. } | MoveMount { .. } => "mounts",
        }
    }

    pub fn errno(&self) -> Option<Errno> {
        use JailError::*;
        match self {
            Input { errno, .. }
            | IdMap { errno, .. }
            | OpenSource { errno, .. }
            | MountTmpfs { errno, .. }
            | Mkdir { errno, .. }
            | Bind { errno, .. }
            | Remount { errno, .. }
            | Symlink { errno, .. }
            | WriteFile { errno, .. }
            | Remove { errno, .. }
            | Chdir { errno, .. }
            | Rlimit { errno, .. }
            | CgroupSelfAttach { errno, .. }
            | CloneIdentity { errno, .. }
            | UserNsLimit { errno, .. }
            | Exec { errno, .. }
            | PythonFds { errno, .. }
            | AdoptCall { errno, .. }
            | Setns { errno, .. }
            | OpenTree { errno, .. }
            | MoveMount { errno, .. } => Some(*errno),
            Pipe(e) | Clone(e) | Setgroups(e) | Wait(e) | Pdeathsig(e) | Setsid(e)
            | UnshareCgroup(e) | MakePrivate(e) | SetFsId(e) | MountProc(e) | PivotRoot(e)
            | DetachOldRoot(e) | LoopbackUp(e) | Hostname(e) | SetGid(e) | SetUid(e)
            | NoNewPrivs(e) | Fork(e) | Random(e) | Signals(e) | UnsharePid(e) => Some(*e),
            ProxyListener { errno, .. } => Some(*errno),
            _ => None,
        }
    }

    pub fn to_setup_error(&self) -> SetupError {
        SetupError {
            step: self.step().to_string(),
            errno: self.errno().map(|e| e as i32),
            message: format!("{}: {}", self.step(), self),
        }
    }
}

fn clone_hint(e: Errno) -> &'static str {
    match e {
        Errno::EPERM | Errno::ENOSPC | Errno::EUSERS => {
            " (user namespaces look disabled: check user.max_user_namespaces and kernel.unprivileged_userns_clone)"
        }
        Errno::EINVAL => " (the kernel lacks a namespace type PRIMS needs)",
        _ => "",
    }
}

fn open_hint(e: Errno) -> &'static str {
    match e {
        Errno::EACCES => {
            " (the jail cannot reach this path: make its parent directories searchable)"
        }
        Errno::ENOENT => " (no such file or directory)",
        _ => "",
    }
}

fn proc_hint(e: Errno) -> &'static str {
    match e {
        Errno::EPERM => " (the host's /proc has parts masked, as inside some containers; run PRIMS with an unmasked /proc)",
        _ => "",
    }
}
