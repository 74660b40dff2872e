//! File operations on cgroup directories. Writes never create files: in
//! cgroupfs every control file already exists, and a missing one means the
//! controller is absent.

use crate::error::CgroupError;
use std::collections::BTreeSet;
use std::ffi::CString;
use std::fs;
use std::io::{self, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long kill and rmdir keep retrying.
pub(crate) const SETTLE_TIMEOUT: Duration = Duration::from_secs(2);
const POLL: Duration = Duration::from_millis(5);
/// Deepest cgroup nesting walked below a job directory.
const MAX_DEPTH: usize = 16;

pub(crate) const CGROUP_SUPER_MAGIC: u64 = 0x0027_e0eb;
pub(crate) const CGROUP2_SUPER_MAGIC: u64 = 0x6367_7270;
pub(crate) const TMPFS_MAGIC: u64 = 0x0102_1994;

/// The filesystem magic of `path` (statfs `f_type`).
pub(crate) fn fs_magic(path: &Path) -> io::Result<u64> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let mut st = MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call, and
    // `st` points to writable memory the size of `struct statfs`.
    let rc = unsafe { libc::statfs(c.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: statfs returned 0, so it filled the whole struct (and it was
    // zero-initialised anyway).
    let st = unsafe { st.assume_init() };
    #[allow(clippy::unnecessary_cast)] // f_type's type differs between targets
    Ok(st.f_type as u64)
}

pub(crate) fn read(path: &Path) -> Result<String, CgroupError> {
    fs::read_to_string(path).map_err(|source| CgroupError::ReadFile {
        path: path.to_path_buf(),
        source,
    })
}

/// Read a file that may legitimately be absent (an optional controller
/// file, or a cgroup already removed).
pub(crate) fn read_optional(path: &Path) -> Result<Option<String>, CgroupError> {
    match fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(CgroupError::ReadFile {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Open an existing file for reading, and writing when `writable`; never
/// creates it and never follows a symlink.
pub(crate) fn open_existing(path: &Path, writable: bool) -> io::Result<fs::File> {
    fs::OpenOptions::new()
        .read(true)
        .write(writable)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// Write `value` with one write(2) into an existing file (no O_CREAT).
pub(crate) fn write_raw(path: &Path, value: &str) -> io::Result<()> {
    let mut f = fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    let n = f.write(value.as_bytes())?;
    if n != value.len() {
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            format!("short write: {n} of {} bytes", value.len()),
        ));
    }
    Ok(())
}

pub(crate) fn write(path: &Path, value: &str) -> Result<(), CgroupError> {
    write_raw(path, value).map_err(|source| CgroupError::WriteFile {
        path: path.to_path_buf(),
        value: value.to_string(),
        source,
    })
}

/// Write a limit file; a missing file gets its own, more helpful error.
pub(crate) fn write_limit(path: &Path, value: &str) -> Result<(), CgroupError> {
    match write_raw(path, value) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(CgroupError::LimitFileMissing {
            path: path.to_path_buf(),
        }),
        Err(source) => Err(CgroupError::WriteFile {
            path: path.to_path_buf(),
            value: value.to_string(),
            source,
        }),
    }
}

pub(crate) fn mkdir(path: &Path) -> io::Result<()> {
    fs::DirBuilder::new().mode(0o755).create(path)
}

/// Create `base/c1/c2/...` as needed. Returns the directories this call
/// created, outermost first. On failure, removes what it created.
pub(crate) fn mkdir_chain(base: &Path, comps: &[String]) -> Result<Vec<PathBuf>, CgroupError> {
    let mut created = Vec::new();
    let mut dir = base.to_path_buf();
    for c in comps {
        dir.push(c);
        match mkdir(&dir) {
            Ok(()) => created.push(dir.clone()),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => {}
            Err(source) => {
                undo_mkdirs(&created);
                return Err(CgroupError::CreateDir { path: dir, source });
            }
        }
    }
    Ok(created)
}

/// Best-effort removal of directories made by `mkdir_chain`, innermost first.
pub(crate) fn undo_mkdirs(created: &[PathBuf]) {
    for d in created.iter().rev() {
        let _ = fs::remove_dir(d);
    }
}

/// Open a directory `O_RDONLY|O_DIRECTORY|O_CLOEXEC` (usable for
/// `CLONE_INTO_CGROUP`).
pub(crate) fn open_dir(path: &Path) -> Result<OwnedFd, CgroupError> {
    let f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(path)
        .map_err(|source| CgroupError::OpenDir {
            path: path.to_path_buf(),
            source,
        })?;
    Ok(OwnedFd::from(f))
}

/// Check that the job directory `path` exists (a directory, not a
/// symlink): [`CgroupError::NoSuchJob`] otherwise.
pub(crate) fn require_job_dir(path: &Path) -> Result<(), CgroupError> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(CgroupError::NoSuchJob {
            path: path.to_path_buf(),
        }),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
            Err(CgroupError::NoSuchJob {
                path: path.to_path_buf(),
            })
        }
        Err(source) => Err(CgroupError::OpenDir {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Parse the pid list of a `cgroup.procs` / `tasks` file.
pub(crate) fn parse_pids(path: &Path, text: &str) -> Result<Vec<libc::pid_t>, CgroupError> {
    text.split_whitespace()
        .map(|t| {
            t.parse::<libc::pid_t>().map_err(|_| CgroupError::Parse {
                path: path.to_path_buf(),
                what: format!("{t:?} is not a pid"),
            })
        })
        .collect()
}

/// Pids listed in a procs file; an absent file (cgroup gone) lists none.
pub(crate) fn read_pids(path: &Path) -> Result<Vec<libc::pid_t>, CgroupError> {
    match read_optional(path)? {
        Some(text) => parse_pids(path, &text),
        None => Ok(Vec::new()),
    }
}

/// `cgroup.procs` of `dir` and of every cgroup below it.
pub(crate) fn procs_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    collect_procs_files(dir, 0, &mut out);
    out
}

fn collect_procs_files(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    out.push(dir.join("cgroup.procs"));
    if depth >= MAX_DEPTH {
        return;
    }
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                collect_procs_files(&e.path(), depth + 1, out);
            }
        }
    }
}

fn listed(files: &[PathBuf]) -> Result<BTreeSet<libc::pid_t>, CgroupError> {
    let mut set = BTreeSet::new();
    for f in files {
        set.extend(read_pids(f)?);
    }
    Ok(set)
}

fn pidfd_open(pid: libc::pid_t) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1;
    // no memory is passed.
    let rc = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = RawFd::try_from(rc).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: the kernel just returned this fd to us and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn pidfd_kill(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: fd is a live pidfd; info is NULL (allowed), flags 0.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            libc::SIGKILL,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn kill_pid(pid: libc::pid_t) -> io::Result<()> {
    // SAFETY: kill takes plain integers. `pid > 0` is checked by the caller,
    // so this never signals a process group or every process.
    if unsafe { libc::kill(pid, libc::SIGKILL) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// SIGKILL every process listed in `files` once. Returns the pids that were
/// listed (empty when the cgroups are empty).
///
/// A pid read from a file may exit and be reused before it is signalled. To
/// never hit an unrelated process, each pid is first pinned with a pidfd, the
/// files are read again, and only pids still listed are signalled through
/// their pidfd.
fn sigkill_listed(files: &[PathBuf]) -> Result<Vec<libc::pid_t>, CgroupError> {
    let mut first = listed(files)?;
    // Never the caller itself, should it sit in the cgroup by mistake.
    if let Ok(me) = libc::pid_t::try_from(std::process::id()) {
        first.remove(&me);
    }
    let mut pinned = Vec::new();
    let mut no_pidfd = Vec::new();
    for &pid in first.iter().filter(|p| **p > 0) {
        match pidfd_open(pid) {
            Ok(fd) => pinned.push((pid, fd)),
            // EINVAL: listed, but its thread group is already gone (it is
            // exiting); the next pass sees whether it left the cgroup.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ESRCH | libc::EINVAL)) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => no_pidfd.push(pid),
            Err(source) => return Err(CgroupError::Signal { pid, source }),
        }
    }
    let again = listed(files)?;
    for (pid, fd) in &pinned {
        if again.contains(pid) {
            match pidfd_kill(fd) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                Err(source) => return Err(CgroupError::Signal { pid: *pid, source }),
            }
        }
    }
    // Kernels before 5.3: plain kill(2), with the same re-check.
    for pid in no_pidfd.into_iter().filter(|p| again.contains(p)) {
        match kill_pid(pid) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
            Err(source) => return Err(CgroupError::Signal { pid, source }),
        }
    }
    Ok(first.into_iter().collect())
}

/// SIGKILL whatever is listed in `files`, repeatedly, until they list
/// nothing or `SETTLE_TIMEOUT` passes.
pub(crate) fn kill_until_empty(files: &[PathBuf]) -> Result<(), CgroupError> {
    let start = Instant::now();
    loop {
        let pids = sigkill_listed(files)?;
        if pids.is_empty() {
            return Ok(());
        }
        if start.elapsed() >= SETTLE_TIMEOUT {
            return Err(CgroupError::KillTimeout {
                path: files.first().cloned().unwrap_or_default(),
                pids,
                waited_ms: millis(start.elapsed()),
            });
        }
        std::thread::sleep(POLL);
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// rmdir `dir` and every cgroup below it, innermost first, retrying on
/// EBUSY until `SETTLE_TIMEOUT` after `start`. An absent directory is fine.
pub(crate) fn remove_tree(dir: &Path, start: Instant) -> Result<(), CgroupError> {
    remove_tree_at(dir, start, 0)
}

fn remove_tree_at(dir: &Path, start: Instant, depth: usize) -> Result<(), CgroupError> {
    if depth < MAX_DEPTH {
        let rd = match fs::read_dir(dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(source) => {
                return Err(CgroupError::ListDir {
                    path: dir.to_path_buf(),
                    source,
                })
            }
        };
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree_at(&e.path(), start, depth + 1)?;
            }
        }
    }
    rmdir_retry(dir, start)
}

fn rmdir_retry(dir: &Path, start: Instant) -> Result<(), CgroupError> {
    loop {
        match fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                if start.elapsed() >= SETTLE_TIMEOUT {
                    return Err(CgroupError::RmdirBusy {
                        path: dir.to_path_buf(),
                        waited_ms: millis(start.elapsed()),
                    });
                }
                std::thread::sleep(POLL);
            }
            Err(source) => {
                return Err(CgroupError::Rmdir {
                    path: dir.to_path_buf(),
                    source,
                })
            }
        }
    }
}

/// Add the sub-directories of `dir` whose names are valid job names.
pub(crate) fn list_job_dirs(dir: &Path, out: &mut BTreeSet<String>) -> Result<(), CgroupError> {
    let rd = fs::read_dir(dir).map_err(|source| CgroupError::ListDir {
        path: dir.to_path_buf(),
        source,
    })?;
    for e in rd {
        let e = e.map_err(|source| CgroupError::ListDir {
            path: dir.to_path_buf(),
            source,
        })?;
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        if let Some(name) = e.file_name().to_str() {
            if crate::name::validate_name(name).is_ok() {
                out.insert(name.to_string());
            }
        }
    }
    Ok(())
}

/// The first `key value` line's value in a flat-keyed file such as
/// `memory.events`, `cpu.stat` or `memory.oom_control`.
pub(crate) fn keyed(path: &Path, text: &str, key: &str) -> Result<Option<u64>, CgroupError> {
    for line in text.lines() {
        let mut it = line.split_whitespace();
        if it.next() == Some(key) {
            let v = it.next().unwrap_or("");
            return v.parse().map(Some).map_err(|_| CgroupError::Parse {
                path: path.to_path_buf(),
                what: format!("{key} has the non-numeric value {v:?}"),
            });
        }
    }
    Ok(None)
}

/// A single-number file such as `memory.peak` or `cpuacct.usage`.
pub(crate) fn single(path: &Path, text: &str) -> Result<u64, CgroupError> {
    let t = text.trim();
    t.parse().map_err(|_| CgroupError::Parse {
        path: path.to_path_buf(),
        what: format!("expected one number, found {t:?}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_and_single() {
        let p = Path::new("x");
        let ev = "low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\noom_group_kill 0\n";
        assert_eq!(keyed(p, ev, "oom_kill").unwrap(), Some(2));
        assert_eq!(keyed(p, ev, "absent").unwrap(), None);
        assert!(keyed(p, "oom_kill x\n", "oom_kill").is_err());
        assert_eq!(single(p, "12345\n").unwrap(), 12345);
        assert!(single(p, "max\n").is_err());
        assert_eq!(parse_pids(p, "1\n22\n").unwrap(), vec![1, 22]);
        assert!(parse_pids(p, "1\nx\n").is_err());
    }

    #[test]
    fn write_never_creates() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("memory.max");
        let err = write_limit(&f, "1").unwrap_err();
        assert!(matches!(err, CgroupError::LimitFileMissing { .. }), "{err}");
        assert!(!f.exists());
        fs::write(&f, "old content that is longer").unwrap();
        write_limit(&f, "1").unwrap();
        assert_eq!(fs::read_to_string(&f).unwrap(), "1");
    }

    #[test]
    fn mkdir_chain_and_undo() {
        let d = tempfile::tempdir().unwrap();
        let comps: Vec<String> = vec!["a".into(), "b".into()];
        fs::create_dir(d.path().join("a")).unwrap();
        let made = mkdir_chain(d.path(), &comps).unwrap();
        assert_eq!(made, vec![d.path().join("a/b")]);
        undo_mkdirs(&made);
        assert!(!d.path().join("a/b").exists());
        assert!(d.path().join("a").exists());
    }

    #[test]
    fn remove_tree_of_empty_dirs() {
        let d = tempfile::tempdir().unwrap();
        let job = d.path().join("job");
        fs::create_dir_all(job.join("sub/inner")).unwrap();
        remove_tree(&job, Instant::now()).unwrap();
        assert!(!job.exists());
        // Absent is fine.
        remove_tree(&job, Instant::now()).unwrap();
    }

    #[test]
    fn kill_until_empty_on_empty_files() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("cgroup.procs");
        fs::write(&f, "").unwrap();
        kill_until_empty(&[f, d.path().join("gone/cgroup.procs")]).unwrap();
    }
}
