//! `copy_tree` and `clear_tree`: a workspace's files copied into another
//! directory (a branch's workspace, a checkpoint, a rollback), and a
//! workspace emptied before a rollback.
//!
//! The source is written by jailed code, and its processes may still run
//! while the walk does, so it is hostile: every step opens the next name
//! beneath a directory fd already held, following no symlink and crossing
//! no mount (`NO_LINKS`); an entry swapped meanwhile is copied as whatever
//! it is when opened, or fails. Symlinks are copied as symlinks (never
//! followed), FIFOs made again, sockets and devices skipped. Regular files
//! keep their holes (only data extents are read), so a sparse file costs
//! what it holds, not its length. Everything copied is owned by `owner`.

use super::error::FsError;
use super::root::open_root;
use super::sys::{self, NO_LINKS};
use nix::errno::Errno;
use nix::fcntl::AtFlags;
use nix::sys::stat::{fstatat, FileStat, Mode, SFlag};
use std::ffi::CStr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::Path;

/// Directories nested deeper than this are refused (each level holds two
/// open directories while the walk is below it).
pub const MAX_COPY_DEPTH: usize = 128;
/// Entries copied at most.
pub const MAX_COPY_ENTRIES: usize = 500_000;

/// What a copy may take.
#[derive(Debug, Clone, Copy)]
pub struct CopyLimits {
    /// Bytes of file data copied in all; past it the copy fails.
    pub max_bytes: u64,
}

/// What a copy did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Copied {
    pub files: u64,
    /// Bytes of file data copied (holes excluded).
    pub bytes: u64,
    /// Entries not copied (sockets, devices), relative to the root.
    pub skipped: Vec<String>,
}

/// Copies the tree under `from` into the existing directory `to`, each
/// entry owned by `owner` (uid and gid). Top-level relative paths in
/// `leave` ("a/b" form) are not copied. Blocking.
pub fn copy_tree(
    from: &Path,
    to: &Path,
    owner: u32,
    leave: &[&str],
    limits: CopyLimits,
) -> Result<Copied, FsError> {
    let src = open_dir(open_root(from)?.as_fd(), c".")?;
    let dst = open_dir(open_root(to)?.as_fd(), c".")?;
    let mut walk = Walk::new(owner, leave, limits);
    walk.dir(src.as_fd(), dst.as_fd(), "", 0)?;
    Ok(walk.done)
}

/// Copies `from_rel` under `from_root` (a regular file, or a directory
/// of them; never through a symlink) to `to_rel` under `to_root`,
/// replacing what is there, owned by `owner`; the bytes copied.
/// `Ok(None)` when there is nothing to copy. Blocking.
pub fn copy_path(
    (from_root, from_rel): (&Path, &str),
    (to_root, to_rel): (&Path, &str),
    owner: u32,
    limits: CopyLimits,
) -> Result<Option<u64>, FsError> {
    let src_root = open_root(from_root)?;
    let name = sys::cstr(from_rel).map_err(io("opening", from_rel))?;
    let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK;
    let from = match sys::openat2(src_root.as_fd(), &name, flags, 0, NO_LINKS) {
        Ok(f) => f,
        Err(Errno::ENOENT) => return Ok(None),
        Err(e) => return Err(io("opening", from_rel)(e)),
    };
    let st = nix::sys::stat::fstat(&from).map_err(io("reading", from_rel))?;
    let kind = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
    remove_path(to_root, to_rel)?;
    let dst_root = open_root(to_root)?;
    let (parent, base) = match to_rel.rsplit_once('/') {
        Some((p, b)) => (Some(p), b),
        None => (None, to_rel),
    };
    let dir = match parent {
        Some(p) => make_dir(dst_root.as_fd(), p, owner)?,
        None => open_dir(dst_root.as_fd(), c".")?,
    };
    let base_c = sys::cstr(base).map_err(io("creating", to_rel))?;
    let mut walk = Walk::new(owner, &[], limits);
    match kind {
        SFlag::S_IFDIR => {
            nix::sys::stat::mkdirat(&dir, base_c.as_c_str(), Mode::S_IRWXU)
                .map_err(io("creating", to_rel))?;
            let d = open_dir(dir.as_fd(), &base_c)?;
            walk.dir(from.as_fd(), d.as_fd(), to_rel, 0)?;
            nix::unistd::fchown(&d, Some(uid(owner)), Some(gid(owner)))
                .map_err(io("chown of", to_rel))?;
        }
        SFlag::S_IFREG => walk.file(from.as_fd(), dir.as_fd(), &base_c, to_rel, &st)?,
        _ => return Err(FsError::NotAFile(from_rel.to_string())),
    }
    Ok(Some(walk.done.bytes))
}

/// `rel` under `root` as a directory, made (owned by `owner`) where it is
/// missing, one component at a time.
fn make_dir(root: BorrowedFd<'_>, rel: &str, owner: u32) -> Result<OwnedFd, FsError> {
    let mut at = open_dir(root, c".")?;
    for part in rel.split('/') {
        let c = sys::cstr(part).map_err(io("opening", rel))?;
        match nix::sys::stat::mkdirat(&at, c.as_c_str(), Mode::S_IRWXU) {
            Ok(()) => {
                let d = open_dir(at.as_fd(), &c)?;
                nix::unistd::fchown(&d, Some(uid(owner)), Some(gid(owner)))
                    .map_err(io("chown of", rel))?;
                at = d;
            }
            Err(Errno::EEXIST) => at = open_dir(at.as_fd(), &c)?,
            Err(e) => return Err(io("creating", rel)(e)),
        }
    }
    Ok(at)
}

/// Removes `rel` under `root`, a file or a whole directory (never
/// through a symlink), if it is there. Blocking.
pub fn remove_path(root: &Path, rel: &str) -> Result<(), FsError> {
    let root_fd = open_root(root)?;
    let (parent, base) = match rel.rsplit_once('/') {
        Some((p, b)) => (p, b),
        None => (".", rel),
    };
    let p = sys::cstr(parent).map_err(io("opening", parent))?;
    let dir = match sys::openat2(
        root_fd.as_fd(),
        &p,
        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
        0,
        NO_LINKS,
    ) {
        Ok(d) => d,
        Err(Errno::ENOENT) => return Ok(()),
        Err(e) => return Err(io("opening", parent)(e)),
    };
    let b = sys::cstr(base).map_err(io("removing", rel))?;
    remove(dir.as_fd(), &b, rel, 0)
}

/// Removes everything under `root` but the top-level names in `keep`.
/// Blocking; the caller makes sure nothing writes there meanwhile.
pub fn clear_tree(root: &Path, keep: &[&str]) -> Result<(), FsError> {
    let dir = open_dir(open_root(root)?.as_fd(), c".")?;
    let (names, _) = sys::read_dir(dir.as_fd(), usize::MAX).map_err(io("listing", "."))?;
    for name in names {
        if keep.iter().any(|k| k.as_bytes() == name.to_bytes()) {
            continue;
        }
        remove(dir.as_fd(), &name, &sys::display(&name), 0)?;
    }
    Ok(())
}

struct Walk<'a> {
    owner: u32,
    leave: &'a [&'a str],
    limits: CopyLimits,
    done: Copied,
    entries: usize,
}

impl<'a> Walk<'a> {
    fn new(owner: u32, leave: &'a [&'a str], limits: CopyLimits) -> Walk<'a> {
        Walk {
            owner,
            leave,
            limits,
            done: Copied::default(),
            entries: 0,
        }
    }

    fn dir(
        &mut self,
        src: BorrowedFd<'_>,
        dst: BorrowedFd<'_>,
        at: &str,
        depth: usize,
    ) -> Result<(), FsError> {
        if depth > MAX_COPY_DEPTH {
            return Err(FsError::TooMany {
                path: at.to_string(),
                max: MAX_COPY_DEPTH,
            });
        }
        let (names, _) = sys::read_dir(src, usize::MAX).map_err(io("listing", at))?;
        for name in names {
            self.entries += 1;
            if self.entries > MAX_COPY_ENTRIES {
                return Err(FsError::TooMany {
                    path: ".".into(),
                    max: MAX_COPY_ENTRIES,
                });
            }
            let rel = join(at, &sys::display(&name));
            if self.leave.contains(&rel.as_str()) {
                continue;
            }
            let st = match fstatat(src, name.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                // Removed by the session's own processes meanwhile.
                Err(Errno::ENOENT) => continue,
                Err(e) => return Err(io("reading", &rel)(e)),
            };
            match SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT {
                SFlag::S_IFDIR => {
                    let mode = Mode::from_bits_truncate(st.st_mode & 0o777);
                    // A new workspace has its `output/` and `mounts/`.
                    match nix::sys::stat::mkdirat(dst, name.as_c_str(), Mode::S_IRWXU) {
                        Ok(()) | Err(Errno::EEXIST) => {}
                        Err(e) => return Err(io("creating", &rel)(e)),
                    }
                    let s = open_dir(src, &name)?;
                    let d = open_dir(dst, &name)?;
                    self.dir(s.as_fd(), d.as_fd(), &rel, depth + 1)?;
                    nix::unistd::fchown(&d, Some(self.uid()), Some(self.gid()))
                        .map_err(io("chown of", &rel))?;
                    nix::sys::stat::fchmod(&d, mode).map_err(io("chmod of", &rel))?;
                    times(d.as_fd(), &st);
                }
                SFlag::S_IFREG => self.file_at(src, dst, &name, &rel, &st)?,
                SFlag::S_IFLNK => {
                    let target = match nix::fcntl::readlinkat(src, name.as_c_str()) {
                        Ok(t) => t,
                        Err(Errno::ENOENT) => continue,
                        Err(e) => return Err(io("reading the link", &rel)(e)),
                    };
                    nix::unistd::symlinkat(target.as_os_str(), dst, name.as_c_str())
                        .map_err(io("creating the link", &rel))?;
                    self.chown_at(dst, &name, &rel)?;
                }
                SFlag::S_IFIFO => {
                    let mode = Mode::from_bits_truncate(st.st_mode & 0o777);
                    nix::sys::stat::mknodat(dst, name.as_c_str(), SFlag::S_IFIFO, mode, 0)
                        .map_err(io("creating the FIFO", &rel))?;
                    self.chown_at(dst, &name, &rel)?;
                }
                _ => self.done.skipped.push(rel),
            }
        }
        Ok(())
    }

    fn file_at(
        &mut self,
        src: BorrowedFd<'_>,
        dst: BorrowedFd<'_>,
        name: &CStr,
        rel: &str,
        st: &FileStat,
    ) -> Result<(), FsError> {
        // O_NONBLOCK: a FIFO swapped in since the stat must not hang us.
        let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK;
        let from = match sys::openat2(src, name, flags, 0, NO_LINKS) {
            Ok(f) => f,
            Err(Errno::ENOENT) => return Ok(()),
            Err(e) => return Err(io("opening", rel)(e)),
        };
        self.file(from.as_fd(), dst, name, rel, st)
    }

    /// Copies the open file `from` to `name` in `dst`.
    fn file(
        &mut self,
        from: BorrowedFd<'_>,
        dst: BorrowedFd<'_>,
        name: &CStr,
        rel: &str,
        st: &FileStat,
    ) -> Result<(), FsError> {
        let now = nix::sys::stat::fstat(from).map_err(io("reading", rel))?;
        if SFlag::from_bits_truncate(now.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG {
            self.done.skipped.push(rel.to_string());
            return Ok(());
        }
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
        let to = match sys::openat2(dst, name, flags, 0o600, NO_LINKS) {
            // A file a pool spare's start left: the source's replaces it.
            Err(Errno::EEXIST) => {
                nix::unistd::unlinkat(dst, name, nix::unistd::UnlinkatFlags::NoRemoveDir)
                    .map_err(io("replacing", rel))?;
                sys::openat2(dst, name, flags, 0o600, NO_LINKS)
            }
            other => other,
        }
        .map_err(io("creating", rel))?;
        let left = self.limits.max_bytes.saturating_sub(self.done.bytes);
        let copied = copy_data(from, to.as_fd(), now.st_size.max(0) as u64, left)
            .map_err(|e| copy_error(e, rel, self.limits))?;
        self.done.bytes += copied;
        self.done.files += 1;
        nix::unistd::fchown(&to, Some(self.uid()), Some(self.gid()))
            .map_err(io("chown of", rel))?;
        let mode = Mode::from_bits_truncate(st.st_mode & 0o777);
        nix::sys::stat::fchmod(&to, mode).map_err(io("chmod of", rel))?;
        times(to.as_fd(), &now);
        Ok(())
    }

    fn chown_at(&self, dir: BorrowedFd<'_>, name: &CStr, rel: &str) -> Result<(), FsError> {
        nix::unistd::fchownat(
            dir,
            name,
            Some(self.uid()),
            Some(self.gid()),
            AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .map_err(io("chown of", rel))
    }

    fn uid(&self) -> nix::unistd::Uid {
        uid(self.owner)
    }

    fn gid(&self) -> nix::unistd::Gid {
        gid(self.owner)
    }
}

fn uid(owner: u32) -> nix::unistd::Uid {
    nix::unistd::Uid::from_raw(owner)
}

fn gid(owner: u32) -> nix::unistd::Gid {
    nix::unistd::Gid::from_raw(owner)
}

fn copy_error(e: CopyError, rel: &str, limits: CopyLimits) -> FsError {
    match e {
        CopyError::Io(Errno::ENOSPC | Errno::EDQUOT) => FsError::NoSpace(rel.to_string()),
        CopyError::Io(e) => io("copying", rel)(e),
        CopyError::TooLarge => FsError::TooLarge {
            path: rel.to_string(),
            max: limits.max_bytes,
        },
    }
}

enum CopyError {
    Io(Errno),
    TooLarge,
}

/// Copies the data extents of `from` (`len` bytes long) into `to`, which
/// gets the same length and holes; at most `left` bytes of data.
fn copy_data(
    from: BorrowedFd<'_>,
    to: BorrowedFd<'_>,
    len: u64,
    left: u64,
) -> Result<u64, CopyError> {
    let mut copied = 0u64;
    let mut at: u64 = 0;
    let mut buf = Vec::new();
    while at < len {
        let start = match seek(from, at, libc::SEEK_DATA) {
            Ok(s) => s,
            // No data past `at`: the rest is a hole.
            Err(Errno::ENXIO) => break,
            Err(e) => return Err(CopyError::Io(e)),
        };
        let end = match seek(from, start, libc::SEEK_HOLE) {
            Ok(e) => e.min(len),
            Err(e) => return Err(CopyError::Io(e)),
        };
        let mut pos = start;
        while pos < end {
            let want = (end - pos).min(1 << 20);
            if copied + want > left {
                return Err(CopyError::TooLarge);
            }
            let n = copy_range(from, to, pos, want as usize, &mut buf).map_err(CopyError::Io)?;
            if n == 0 {
                // The file shrank meanwhile: what is left is gone.
                return finish(to, pos).map(|()| copied);
            }
            pos += n as u64;
            copied += n as u64;
        }
        at = end;
    }
    finish(to, len).map(|()| copied)
}

/// The copy's length set to `len` (its tail may be a hole).
fn finish(to: BorrowedFd<'_>, len: u64) -> Result<(), CopyError> {
    nix::unistd::ftruncate(to, len as i64).map_err(CopyError::Io)
}

/// One piece at offset `pos` of both files: in the kernel when it can
/// (`copy_file_range`: a clone on a filesystem that shares extents), else
/// through `buf`.
fn copy_range(
    from: BorrowedFd<'_>,
    to: BorrowedFd<'_>,
    pos: u64,
    want: usize,
    buf: &mut Vec<u8>,
) -> Result<usize, Errno> {
    let (mut off_in, mut off_out) = (pos as i64, pos as i64);
    // SAFETY: both fds are open for the call; the offsets are locals the
    // kernel updates, and no buffer of ours is passed.
    let r = unsafe {
        libc::copy_file_range(
            from.as_raw_fd(),
            &mut off_in,
            to.as_raw_fd(),
            &mut off_out,
            want,
            0,
        )
    };
    if r >= 0 {
        return Ok(r as usize);
    }
    match Errno::last() {
        Errno::EXDEV | Errno::EINVAL | Errno::ENOSYS | Errno::EOPNOTSUPP => {}
        e => return Err(e),
    }
    buf.resize(want, 0);
    let n = nix::sys::uio::pread(from, &mut buf[..want], pos as i64)?;
    let mut done = 0;
    while done < n {
        done += nix::sys::uio::pwrite(to, &buf[done..n], (pos + done as u64) as i64)?;
    }
    Ok(n)
}

fn seek(fd: BorrowedFd<'_>, at: u64, whence: i32) -> Result<u64, Errno> {
    // SAFETY: lseek on an fd we hold; no memory is passed.
    let r = unsafe { libc::lseek(fd.as_raw_fd(), at as i64, whence) };
    if r < 0 {
        Err(Errno::last())
    } else {
        Ok(r as u64)
    }
}

/// Gives `fd` the access and modification times of `st` (best effort: a
/// copy with today's times is still a copy).
fn times(fd: BorrowedFd<'_>, st: &FileStat) {
    use nix::sys::time::TimeSpec;
    let atime = TimeSpec::new(st.st_atime, st.st_atime_nsec);
    let mtime = TimeSpec::new(st.st_mtime, st.st_mtime_nsec);
    let _ = nix::sys::stat::futimens(fd, &atime, &mtime);
}

/// Removes `name` under `dir`, a whole tree if it is a directory.
fn remove(dir: BorrowedFd<'_>, name: &CStr, rel: &str, depth: usize) -> Result<(), FsError> {
    match nix::unistd::unlinkat(dir, name, nix::unistd::UnlinkatFlags::NoRemoveDir) {
        Ok(()) | Err(Errno::ENOENT) => return Ok(()),
        Err(Errno::EISDIR) => {}
        Err(e) => return Err(io("removing", rel)(e)),
    }
    if depth > MAX_COPY_DEPTH * 4 {
        return Err(FsError::TooMany {
            path: rel.to_string(),
            max: MAX_COPY_DEPTH * 4,
        });
    }
    let sub = open_dir(dir, name)?;
    let (names, _) = sys::read_dir(sub.as_fd(), usize::MAX).map_err(io("listing", rel))?;
    for n in names {
        remove(sub.as_fd(), &n, &join(rel, &sys::display(&n)), depth + 1)?;
    }
    drop(sub);
    match nix::unistd::unlinkat(dir, name, nix::unistd::UnlinkatFlags::RemoveDir) {
        Ok(()) | Err(Errno::ENOENT) => Ok(()),
        Err(e) => Err(io("removing", rel)(e)),
    }
}

/// `name` under `dir` as a directory to read and write in, never through
/// a symlink or across a mount.
fn open_dir(dir: BorrowedFd<'_>, name: &CStr) -> Result<OwnedFd, FsError> {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW;
    sys::openat2(dir, name, flags, 0, NO_LINKS).map_err(io("opening", &sys::display(name)))
}

fn join(at: &str, name: &str) -> String {
    if at.is_empty() {
        name.to_string()
    } else {
        format!("{at}/{name}")
    }
}

fn io<'a>(op: &'static str, path: &'a str) -> impl Fn(Errno) -> FsError + 'a {
    move |errno| match errno {
        Errno::ENOSPC | Errno::EDQUOT => FsError::NoSpace(path.to_string()),
        errno => FsError::Io {
            op,
            path: path.to_string(),
            errno,
        },
    }
}

#[cfg(test)]
#[path = "copy/tests.rs"]
mod tests;
