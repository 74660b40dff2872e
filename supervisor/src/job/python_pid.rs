//! Finding a spawned jail's python from the host, to signal it. The
//! jailer's only child is the jail's init, pid 1 of the jail's pid
//! namespace; python is the init's child that is pid 2 there. Other
//! children of the init are orphans python left behind, never pid 2: the
//! init forks python first, and the namespace dies with python.
//!
//! A pid read from /proc may be reused before it is opened, so the search
//! runs again once the pidfd is open: the same answer means the pidfd holds
//! python, and a signal through it never reaches another process.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

#[derive(Debug, thiserror::Error)]
pub enum PythonPidError {
    #[error("the jail's python is not running: {0}")]
    NotRunning(&'static str),
    #[error("reading {path}")]
    Proc {
        path: String,
        #[source]
        source: io::Error,
    },
    #[error("{path} is not in the expected form")]
    Malformed { path: String },
    #[error("pidfd_open({pid})")]
    Pidfd {
        pid: libc::pid_t,
        #[source]
        source: io::Error,
    },
}

/// A pidfd of the python of the jail whose jailer is `jailer`, a child of
/// this process that is not reaped yet.
pub fn python_pidfd(jailer: libc::pid_t) -> Result<OwnedFd, PythonPidError> {
    python_process(jailer).map(|p| p.pidfd)
}

/// The jail's python, held: a pidfd to signal it by, and its `/proc`
/// directory, which stays python's (and fails with ESRCH once it is gone).
#[derive(Debug)]
pub struct PythonProcess {
    pub pidfd: OwnedFd,
    pub proc_dir: OwnedFd,
}

/// [`python_pidfd`], and python's `/proc` directory with it.
pub fn python_process(jailer: libc::pid_t) -> Result<PythonProcess, PythonPidError> {
    python_process_in(jailer, Layout::Nested)
}

/// Where a jail's python sits, for [`python_process_in`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// pid 2 of a namespace nested in ours, the child of its init, pid 1.
    Nested,
    /// In our pid namespace, the child of the jail's init (a template).
    Shallow,
    /// pid 2 of the init's namespace, but not its child: the child of a
    /// process the template python `template` forked, which stays outside.
    Adopted { template: libc::pid_t },
    /// In the init's namespace, the child of `parent`: a python forked in
    /// place of the adopted one (any pid, not 2).
    InPlace { parent: libc::pid_t },
}

/// [`python_process`] of a jail laid out as `layout` says.
pub fn python_process_in(
    jailer: libc::pid_t,
    layout: Layout,
) -> Result<PythonProcess, PythonPidError> {
    let find = |jailer| match layout {
        Layout::Nested => find(jailer),
        Layout::Shallow => find_shallow(jailer),
        Layout::Adopted { template } => find_adopted(jailer, template),
        Layout::InPlace { parent } => find_in_place(jailer, parent),
    };
    let python = find(jailer)?;
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, python, 0) };
    if fd < 0 {
        return Err(PythonPidError::Pidfd {
            pid: python,
            source: io::Error::last_os_error(),
        });
    }
    // SAFETY: the kernel returned a new pidfd (close-on-exec) nothing else owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) };
    let path = format!("/proc/{python}");
    let proc_dir = std::fs::File::open(&path)
        .map(OwnedFd::from)
        .map_err(|source| PythonPidError::Proc { path, source })?;
    // Both were opened while `python` was still the jail's python.
    if find(jailer)? != python {
        return Err(PythonPidError::NotRunning(
            "python ended while it was being opened",
        ));
    }
    Ok(PythonProcess { pidfd, proc_dir })
}

/// The python behind `pidfd`, which `parent` forked in place of another
/// and handed over (python's parent, outside its jail): its pid from the
/// pidfd's fdinfo, and that it is a live child of `parent` in a namespace
/// nested in ours. Two reads, where [`Layout::InPlace`] walks /proc twice.
pub fn python_process_of(
    pidfd: OwnedFd,
    parent: libc::pid_t,
) -> Result<PythonProcess, PythonPidError> {
    let path = format!("/proc/self/fdinfo/{}", pidfd.as_raw_fd());
    let Some(info) = read_proc(path.clone())? else {
        return Err(PythonPidError::Malformed { path });
    };
    // A pidfd's fdinfo names its pid as we see it: -1 once it ended.
    let pid: i64 = field(&info, "Pid")
        .and_then(|v| v.parse().ok())
        .ok_or(PythonPidError::Malformed { path })?;
    let python =
        libc::pid_t::try_from(pid)
            .ok()
            .filter(|p| *p > 0)
            .ok_or(PythonPidError::NotRunning(
                "python ended before it was found",
            ))?;
    let path = format!("/proc/{python}");
    let proc_dir = std::fs::File::open(&path)
        .map(OwnedFd::from)
        .map_err(|source| PythonPidError::Proc { path, source })?;
    let ours = status(python)?
        .is_some_and(|s| s.ppid == parent && s.nspid.len() >= 2 && !matches!(s.state, 'Z' | 'X'));
    if !ours {
        return Err(PythonPidError::NotRunning(
            "the pidfd is not of a live child of python's parent",
        ));
    }
    // Still alive, so `python` named it all along: the directory is its.
    if pidfd_signal(pidfd.as_fd(), 0).is_err() {
        return Err(PythonPidError::NotRunning(
            "python ended while it was being opened",
        ));
    }
    Ok(PythonProcess { pidfd, proc_dir })
}

/// SIGINT to the process behind `pidfd`: python raises KeyboardInterrupt.
pub fn send_sigint(pidfd: BorrowedFd<'_>) -> io::Result<()> {
    pidfd_signal(pidfd, libc::SIGINT)
}

/// `signal` to the process behind `pidfd`; 0 only checks that it lives.
fn pidfd_signal(pidfd: BorrowedFd<'_>, signal: libc::c_int) -> io::Result<()> {
    // SAFETY: pidfd is a live fd; no siginfo is passed.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            signal,
            std::ptr::null::<libc::siginfo_t>(),
            0u32,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// python's pid as the host sees it.
fn find(jailer: libc::pid_t) -> Result<libc::pid_t, PythonPidError> {
    let init = match children(jailer)?[..] {
        [init] => init,
        [] => return Err(PythonPidError::NotRunning("the jailer has no init")),
        _ => {
            return Err(PythonPidError::NotRunning(
                "the jailer has several children",
            ))
        }
    };
    if !status(init)?.is_some_and(|s| s.is_init()) {
        return Err(PythonPidError::NotRunning(
            "the jailer's child is not a jail's init",
        ));
    }
    for pid in children(init)? {
        if status(pid)?.is_some_and(|s| s.is_python()) {
            return Ok(pid);
        }
    }
    Err(PythonPidError::NotRunning("the init has no live python"))
}

/// python of a jail without a pid namespace: the only child of the
/// jailer's only child, both in our namespace.
fn find_shallow(jailer: libc::pid_t) -> Result<libc::pid_t, PythonPidError> {
    let [init] = children(jailer)?[..] else {
        return Err(PythonPidError::NotRunning("the jailer has no single init"));
    };
    for pid in children(init)? {
        if status(pid)?.is_some_and(|s| s.nspid.len() == 1 && !matches!(s.state, 'Z' | 'X')) {
            return Ok(pid);
        }
    }
    Err(PythonPidError::NotRunning("the init has no live python"))
}

/// The only live child of `parent` that lives in the pid namespace of the
/// jailer's only child, its init.
fn find_in_place(jailer: libc::pid_t, parent: libc::pid_t) -> Result<libc::pid_t, PythonPidError> {
    let theirs = init_namespace(jailer)?;
    let mut found = None;
    for pid in children(parent)? {
        let alive =
            status(pid)?.is_some_and(|s| s.nspid.len() >= 2 && !matches!(s.state, 'Z' | 'X'));
        if alive && pid_namespace(pid).as_ref() == Some(&theirs) {
            if found.is_some() {
                return Err(PythonPidError::NotRunning(
                    "python's parent has several children",
                ));
            }
            found = Some(pid);
        }
    }
    found.ok_or(PythonPidError::NotRunning(
        "the init's namespace has no live python",
    ))
}

fn pid_namespace(pid: libc::pid_t) -> Option<std::path::PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok()
}

/// The pid namespace of the jailer's only child, a jail's init.
fn init_namespace(jailer: libc::pid_t) -> Result<std::path::PathBuf, PythonPidError> {
    let [init] = children(jailer)?[..] else {
        return Err(PythonPidError::NotRunning("the jailer has no single init"));
    };
    if !status(init)?.is_some_and(|s| s.is_init()) {
        return Err(PythonPidError::NotRunning(
            "the jailer's child is not a jail's init",
        ));
    }
    pid_namespace(init).ok_or(PythonPidError::NotRunning("the init is gone"))
}

/// pid 2 of the pid namespace of the jailer's only child, its init: a
/// grandchild of the template python, whose children are few (one per
/// live forked interpreter), unlike all the host's processes.
fn find_adopted(jailer: libc::pid_t, template: libc::pid_t) -> Result<libc::pid_t, PythonPidError> {
    let theirs = init_namespace(jailer)?;
    for forked in children(template)? {
        for pid in children(forked)? {
            if pid_namespace(pid).as_ref() == Some(&theirs)
                && status(pid)?.is_some_and(|s| s.is_python())
            {
                return Ok(pid);
            }
        }
    }
    Err(PythonPidError::NotRunning(
        "the init's namespace has no live python",
    ))
}

/// The text of a /proc file; `None` when its process is gone.
fn read_proc(path: String) -> Result<Option<String>, PythonPidError> {
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ESRCH)) => Ok(None),
        Err(source) => Err(PythonPidError::Proc { path, source }),
    }
}

fn children(pid: libc::pid_t) -> Result<Vec<libc::pid_t>, PythonPidError> {
    let path = format!("/proc/{pid}/task/{pid}/children");
    let Some(text) = read_proc(path.clone())? else {
        return Ok(Vec::new());
    };
    parse_pids(&text).ok_or(PythonPidError::Malformed { path })
}

fn status(pid: libc::pid_t) -> Result<Option<ProcStatus>, PythonPidError> {
    let path = format!("/proc/{pid}/status");
    let Some(text) = read_proc(path.clone())? else {
        return Ok(None);
    };
    parse_status(&text)
        .map(Some)
        .ok_or(PythonPidError::Malformed { path })
}

/// Space-separated pids, as in a `children` file; `None` on anything else.
fn parse_pids(text: &str) -> Option<Vec<libc::pid_t>> {
    text.split_ascii_whitespace()
        .map(|p| p.parse().ok().filter(|p| *p > 0))
        .collect()
}

/// What a /proc status file tells about a process.
#[derive(Debug, PartialEq, Eq)]
struct ProcStatus {
    /// Its pid in each pid namespace, outermost (ours) first.
    nspid: Vec<libc::pid_t>,
    /// `R`, `S`, `Z`, ...
    state: char,
    ppid: libc::pid_t,
}

impl ProcStatus {
    /// Pid 1 of a namespace nested in ours.
    fn is_init(&self) -> bool {
        self.nspid.len() >= 2 && self.nspid.last() == Some(&1)
    }

    /// Pid 2 of a namespace nested in ours, and not yet dead.
    fn is_python(&self) -> bool {
        self.nspid.len() >= 2 && self.nspid.last() == Some(&2) && !matches!(self.state, 'Z' | 'X')
    }
}

fn parse_status(text: &str) -> Option<ProcStatus> {
    Some(ProcStatus {
        nspid: parse_pids(field(text, "NSpid")?).filter(|p| !p.is_empty())?,
        state: field(text, "State")?.chars().next()?,
        ppid: field(text, "PPid")?.parse().ok()?,
    })
}

/// The value of a `Key:\tvalue` line of a /proc status or fdinfo file.
fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .map(str::trim)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_files_parse_as_pids() {
        assert_eq!(parse_pids(""), Some(vec![]));
        assert_eq!(parse_pids("4242 "), Some(vec![4242]));
        assert_eq!(parse_pids("4242 4250 \n"), Some(vec![4242, 4250]));
        for bad in ["42x", "-1", "0", "4242,4250", "99999999999"] {
            assert_eq!(parse_pids(bad), None, "{bad:?}");
        }
    }

    fn status_of(nspid: &str, state: &str) -> String {
        format!("Name:\tpython\nState:\t{state}\nTgid:\t4242\nPid:\t4242\nNSpid:\t{nspid}\nPPid:\t4241\n")
    }

    #[test]
    fn python_is_pid_2_of_a_nested_namespace_and_alive() {
        let s = parse_status(&status_of("4242\t2", "S (sleeping)")).unwrap();
        assert_eq!(
            s,
            ProcStatus {
                nspid: vec![4242, 2],
                state: 'S',
                ppid: 4241,
            }
        );
        assert!(s.is_python() && !s.is_init());
        // The supervisor itself in a container: one more level.
        assert!(parse_status(&status_of("4242\t77\t2", "R (running)"))
            .unwrap()
            .is_python());
    }

    #[test]
    fn anything_else_is_not_python() {
        for (nspid, state) in [
            // Pid 2 of our own namespace: no jail's python.
            ("2", "S (sleeping)"),
            // An orphan python left behind.
            ("4250\t7", "S (sleeping)"),
            // Dead, not yet reaped.
            ("4242\t2", "Z (zombie)"),
            ("4242\t2", "X (dead)"),
        ] {
            let s = parse_status(&status_of(nspid, state)).unwrap();
            assert!(!s.is_python(), "{nspid:?} {state:?}");
        }
    }

    #[test]
    fn the_init_is_pid_1_of_a_nested_namespace() {
        assert!(parse_status(&status_of("4241\t1", "S (sleeping)"))
            .unwrap()
            .is_init());
        // Our own init.
        assert!(!parse_status(&status_of("1", "S (sleeping)"))
            .unwrap()
            .is_init());
    }

    #[test]
    fn a_status_without_nspid_or_state_is_malformed() {
        assert_eq!(parse_status("Name:\tx\nState:\tS (sleeping)\n"), None);
        assert_eq!(parse_status("Name:\tx\nNSpid:\t4242\t2\n"), None);
        assert_eq!(parse_status("State:\tS\nNSpid:\t\n"), None);
        assert_eq!(parse_status("State:\tS\nNSpid:\t4242\tx\n"), None);
        // A key that only starts like one is not it.
        assert_eq!(parse_status("State:\tS\nNSpidx:\t4242\t2\n"), None);
    }

    #[test]
    fn our_own_status_parses() {
        // This thread's: the process's shows its main thread, asleep.
        let text = std::fs::read_to_string("/proc/thread-self/status").unwrap();
        let s = parse_status(&text).unwrap();
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        assert_eq!((s.nspid.first(), s.state), (Some(&tid), 'R'));
    }

    #[test]
    fn a_process_without_a_jail_has_no_python() {
        // This test process has no children that are a jail's init.
        let me = std::process::id() as libc::pid_t;
        assert!(matches!(
            python_pidfd(me),
            Err(PythonPidError::NotRunning(_))
        ));
    }

    fn pidfd_of(pid: libc::pid_t) -> OwnedFd {
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        assert!(fd >= 0, "pidfd_open({pid}): {}", io::Error::last_os_error());
        // SAFETY: the kernel returned a new fd nothing else owns.
        unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) }
    }

    #[test]
    fn a_handed_pidfd_names_its_process_only_as_its_parents_live_child() {
        // `sleep` is the child of `unshare`, in a pid namespace nested in
        // ours, as a python forked in place is the child of its parent.
        let mut unshare = std::process::Command::new("unshare")
            .args(["--pid", "--fork", "sleep", "60"])
            .spawn()
            .unwrap();
        let parent = unshare.id() as libc::pid_t;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let child = loop {
            if let [child] = children(parent).unwrap()[..] {
                break child;
            }
            assert!(std::time::Instant::now() < deadline, "no child");
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        let found = python_process_of(pidfd_of(child), parent).unwrap();
        let via_dir = format!("/proc/self/fd/{}/status", found.proc_dir.as_raw_fd());
        let status = parse_status(&std::fs::read_to_string(via_dir).unwrap()).unwrap();
        assert_eq!((status.nspid[0], status.ppid), (child, parent));

        // Another parent's child is refused, and so is an fd that is not a
        // pidfd.
        assert!(matches!(
            python_process_of(pidfd_of(child), parent + 1),
            Err(PythonPidError::NotRunning(_))
        ));
        let null = OwnedFd::from(std::fs::File::open("/dev/null").unwrap());
        assert!(matches!(
            python_process_of(null, parent),
            Err(PythonPidError::Malformed { .. })
        ));

        // Once it ended and was reaped, its pidfd names nobody.
        let late = pidfd_of(child);
        pidfd_signal(found.pidfd.as_fd(), libc::SIGKILL).unwrap();
        unshare.wait().unwrap();
        assert!(matches!(
            python_process_of(late, parent),
            Err(PythonPidError::NotRunning(_))
        ));
    }
}
