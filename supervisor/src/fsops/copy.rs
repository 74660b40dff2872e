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
//!
//! A copy is charged what it really takes on the destination's disk, not
//! the length of its files: every entry its allocated blocks, and at least
//! one block of the destination's filesystem (a symlink, a FIFO, a
//! directory or an empty file may hold none, but its inode and the name
//! naming it take room), and one inode. A farm of symlinks to long targets
//! holds no file data at all, yet costs a block and an inode each. The copy
//! fails as soon as either would pass its [`CopyLimits`], and removes what
//! it made: a failed copy leaves nothing of its own behind.

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
/// The block charged when the destination's filesystem does not say its
/// own (statvfs `f_frsize`).
const DEFAULT_BLOCK: u64 = 4096;

/// What a copy may take of its destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyLimits {
    /// Bytes of disk in all ([`Copied::disk_bytes`]); past it the copy
    /// fails.
    pub max_bytes: u64,
    /// Inodes in all ([`Copied::inodes`]); past it the copy fails.
    pub max_inodes: u64,
}

impl CopyLimits {
    /// No bound but the destination's own (a quota image's blocks and
    /// inodes).
    pub const ANY: CopyLimits = CopyLimits {
        max_bytes: u64::MAX,
        max_inodes: u64::MAX,
    };

    /// What is left of these limits once `used` is taken.
    pub fn less(self, used: &Copied) -> CopyLimits {
        CopyLimits {
            max_bytes: self.max_bytes.saturating_sub(used.disk_bytes),
            max_inodes: self.max_inodes.saturating_sub(used.inodes),
        }
    }

    /// The tighter of both limits, each bound by bound.
    pub fn min(self, other: CopyLimits) -> CopyLimits {
        CopyLimits {
            max_bytes: self.max_bytes.min(other.max_bytes),
            max_inodes: self.max_inodes.min(other.max_inodes),
        }
    }
}

/// What a copy did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Copied {
    pub files: u64,
    /// Bytes of file data copied (holes excluded).
    pub bytes: u64,
    /// What the copy takes on the destination's disk: every entry's
    /// allocated blocks (`st_blocks`), at least one block each.
    pub disk_bytes: u64,
    /// Entries made (files, directories, symlinks, FIFOs): one inode each.
    pub inodes: u64,
    /// Entries not copied (sockets, devices), relative to the root.
    pub skipped: Vec<String>,
}

impl Copied {
    /// Both copies' costs together.
    pub fn add(&mut self, other: &Copied) {
        self.files += other.files;
        self.bytes += other.bytes;
        self.disk_bytes = self.disk_bytes.saturating_add(other.disk_bytes);
        self.inodes = self.inodes.saturating_add(other.inodes);
        self.skipped.extend(other.skipped.iter().cloned());
    }
}

/// Copies the tree under `from` into the existing directory `to`, each
/// entry owned by `owner` (uid and gid). Top-level relative paths in
/// `leave` ("a/b" form) are not copied. On failure nothing it made is
/// left. Blocking.
pub fn copy_tree(
    from: &Path,
    to: &Path,
    owner: u32,
    leave: &[&str],
    limits: CopyLimits,
) -> Result<Copied, FsError> {
    let src = open_dir(open_root(from)?.as_fd(), c".")?;
    let dst = open_dir(open_root(to)?.as_fd(), c".")?;
    let mut walk = Walk::new(owner, leave, limits, block_size(dst.as_fd()));
    if let Err(e) = walk.dir(src.as_fd(), dst.as_fd(), "", 0) {
        walk.undo(dst.as_fd());
        return Err(e);
    }
    Ok(walk.done)
}

/// Copies `from_rel` under `from_root` (a regular file, or a directory
/// of them; never through a symlink) to `to_rel` under `to_root`,
/// replacing what is there, owned by `owner`; what it copied. `Ok(None)`
/// when there is nothing to copy. On failure `to_rel` is gone. Blocking.
pub fn copy_path(
    (from_root, from_rel): (&Path, &str),
    (to_root, to_rel): (&Path, &str),
    owner: u32,
    limits: CopyLimits,
) -> Result<Option<Copied>, FsError> {
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
    if !matches!(kind, SFlag::S_IFDIR | SFlag::S_IFREG) {
        return Err(FsError::NotAFile(from_rel.to_string()));
    }
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
    let mut walk = Walk::new(owner, &[], limits, block_size(dir.as_fd()));
    let copied = if kind == SFlag::S_IFDIR {
        walk.stripes(from.as_fd(), dir.as_fd(), &base_c, to_rel)
    } else {
        walk.file(from.as_fd(), dir.as_fd(), (&base_c, to_rel), &st)
    };
    if let Err(e) = copied {
        // Whatever is there now is the copy's: what was there went first.
        if let Err(e) = remove(dir.as_fd(), &base_c, to_rel, 0) {
            tracing::warn!(path = %to_rel, error = %e, "could not remove a failed copy");
        }
        return Err(e);
    }
    Ok(Some(walk.done))
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
    /// The destination filesystem's block: the least an entry is charged.
    block: u64,
    done: Copied,
    entries: usize,
    /// The walk is in a directory it made: what it makes there goes with
    /// that directory if the copy fails.
    fresh: bool,
    /// Entries made in directories that were there before (the root, a
    /// new workspace's `output/`), relative to the root: what a failed
    /// copy removes.
    to_undo: Vec<String>,
}

impl<'a> Walk<'a> {
    fn new(owner: u32, leave: &'a [&'a str], limits: CopyLimits, block: u64) -> Walk<'a> {
        Walk {
            owner,
            leave,
            limits,
            block,
            done: Copied::default(),
            entries: 0,
            fresh: false,
            to_undo: Vec::new(),
        }
    }

    /// Copies the entries of `src` into `dst`.
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
            self.entry((src, dst), &name, at, depth)?;
        }
        Ok(())
    }

    /// Copies `name` of `src` into `dst`.
    fn entry(
        &mut self,
        (src, dst): (BorrowedFd<'_>, BorrowedFd<'_>),
        name: &CStr,
        at: &str,
        depth: usize,
    ) -> Result<(), FsError> {
        self.entries += 1;
        if self.entries > MAX_COPY_ENTRIES {
            return Err(FsError::TooMany {
                path: ".".into(),
                max: MAX_COPY_ENTRIES,
            });
        }
        let rel = join(at, &sys::display(name));
        if self.leave.contains(&rel.as_str()) {
            return Ok(());
        }
        let st = match fstatat(src, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            // Removed by the session's own processes meanwhile.
            Err(Errno::ENOENT) => return Ok(()),
            Err(e) => return Err(io("reading", &rel)(e)),
        };
        match SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT {
            SFlag::S_IFDIR => self.sub_dir((src, dst), (name, &rel), &st, depth),
            SFlag::S_IFREG => self.file_at((src, dst), (name, &rel), &st),
            SFlag::S_IFLNK => self.symlink((src, dst), (name, &rel)),
            SFlag::S_IFIFO => self.fifo(dst, (name, &rel), &st),
            _ => {
                self.done.skipped.push(rel);
                Ok(())
            }
        }
    }

    fn sub_dir(
        &mut self,
        (src, dst): (BorrowedFd<'_>, BorrowedFd<'_>),
        (name, rel): (&CStr, &str),
        st: &FileStat,
        depth: usize,
    ) -> Result<(), FsError> {
        let mode = Mode::from_bits_truncate(st.st_mode & 0o777);
        self.reserve(rel)?;
        // A new workspace has its `output/` and `mounts/`.
        let made = match nix::sys::stat::mkdirat(dst, name, Mode::S_IRWXU) {
            Ok(()) => true,
            Err(Errno::EEXIST) => false,
            Err(e) => return Err(io("creating", rel)(e)),
        };
        if made {
            self.made(rel);
        }
        let s = open_dir(src, name)?;
        let d = open_dir(dst, name)?;
        let outer = self.fresh;
        self.fresh = outer || made;
        let copied = self.dir(s.as_fd(), d.as_fd(), rel, depth + 1);
        self.fresh = outer;
        copied?;
        nix::unistd::fchown(&d, Some(self.uid()), Some(self.gid())).map_err(io("chown of", rel))?;
        nix::sys::stat::fchmod(&d, mode).map_err(io("chmod of", rel))?;
        times(d.as_fd(), st);
        // A directory grows with its entries: charged once they are in.
        let now = nix::sys::stat::fstat(&d).map_err(io("reading", rel))?;
        self.settle(&now, rel)
    }

    /// The directory `from` (open), of regular files alone, as `name` in
    /// `dst`: a save's stripes.
    fn stripes(
        &mut self,
        from: BorrowedFd<'_>,
        dst: BorrowedFd<'_>,
        name: &CStr,
        rel: &str,
    ) -> Result<(), FsError> {
        self.reserve(rel)?;
        nix::sys::stat::mkdirat(dst, name, Mode::S_IRWXU).map_err(io("creating", rel))?;
        let d = open_dir(dst, name)?;
        self.fresh = true;
        self.dir(from, d.as_fd(), rel, 0)?;
        nix::unistd::fchown(&d, Some(self.uid()), Some(self.gid())).map_err(io("chown of", rel))?;
        let now = nix::sys::stat::fstat(&d).map_err(io("reading", rel))?;
        self.settle(&now, rel)
    }

    fn symlink(
        &mut self,
        (src, dst): (BorrowedFd<'_>, BorrowedFd<'_>),
        (name, rel): (&CStr, &str),
    ) -> Result<(), FsError> {
        let target = match nix::fcntl::readlinkat(src, name) {
            Ok(t) => t,
            Err(Errno::ENOENT) => return Ok(()),
            Err(e) => return Err(io("reading the link", rel)(e)),
        };
        self.reserve(rel)?;
        nix::unistd::symlinkat(target.as_os_str(), dst, name)
            .map_err(io("creating the link", rel))?;
        self.made(rel);
        self.chown_at(dst, name, rel)?;
        // A target too long for the inode takes blocks of its own.
        let now = fstatat(dst, name, AtFlags::AT_SYMLINK_NOFOLLOW)
            .map_err(io("reading the link", rel))?;
        self.settle(&now, rel)
    }

    fn fifo(
        &mut self,
        dst: BorrowedFd<'_>,
        (name, rel): (&CStr, &str),
        st: &FileStat,
    ) -> Result<(), FsError> {
        let mode = Mode::from_bits_truncate(st.st_mode & 0o777);
        self.reserve(rel)?;
        nix::sys::stat::mknodat(dst, name, SFlag::S_IFIFO, mode, 0)
            .map_err(io("creating the FIFO", rel))?;
        self.made(rel);
        self.chown_at(dst, name, rel)
    }

    fn file_at(
        &mut self,
        (src, dst): (BorrowedFd<'_>, BorrowedFd<'_>),
        (name, rel): (&CStr, &str),
        st: &FileStat,
    ) -> Result<(), FsError> {
        // O_NONBLOCK: a FIFO swapped in since the stat must not hang us.
        let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK;
        let from = match sys::openat2(src, name, flags, 0, NO_LINKS) {
            Ok(f) => f,
            Err(Errno::ENOENT) => return Ok(()),
            Err(e) => return Err(io("opening", rel)(e)),
        };
        self.file(from.as_fd(), dst, (name, rel), st)
    }

    /// Copies the open file `from` to `name` in `dst`.
    fn file(
        &mut self,
        from: BorrowedFd<'_>,
        dst: BorrowedFd<'_>,
        (name, rel): (&CStr, &str),
        st: &FileStat,
    ) -> Result<(), FsError> {
        let now = nix::sys::stat::fstat(from).map_err(io("reading", rel))?;
        if SFlag::from_bits_truncate(now.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG {
            self.done.skipped.push(rel.to_string());
            return Ok(());
        }
        self.reserve(rel)?;
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
        self.made(rel);
        // The block reserved above holds the data's first block.
        let left = self.bytes_left().saturating_add(self.block);
        let copied = copy_data(from, to.as_fd(), now.st_size.max(0) as u64, left)
            .map_err(|e| copy_error(e, rel, self.limits))?;
        self.done.bytes += copied;
        self.done.files += 1;
        nix::unistd::fchown(&to, Some(self.uid()), Some(self.gid()))
            .map_err(io("chown of", rel))?;
        let mode = Mode::from_bits_truncate(st.st_mode & 0o777);
        nix::sys::stat::fchmod(&to, mode).map_err(io("chmod of", rel))?;
        times(to.as_fd(), &now);
        let written = nix::sys::stat::fstat(&to).map_err(io("reading", rel))?;
        self.settle(&written, rel)
    }

    /// Notes the entry `rel`, just made, for [`Walk::undo`].
    fn made(&mut self, rel: &str) {
        if !self.fresh {
            self.to_undo.push(rel.to_string());
        }
    }

    /// Removes, as far as it can, what a failed copy made under `root`:
    /// each entry it made in a directory that was there before, and with
    /// it everything below.
    fn undo(&self, root: BorrowedFd<'_>) {
        for rel in self.to_undo.iter().rev() {
            if let Err(e) = remove_beneath(root, rel) {
                tracing::warn!(path = %rel, error = %e, "could not remove part of a failed copy");
            }
        }
    }

    /// Charges an entry about to be made its inode and one block: refused
    /// when either would pass the limits.
    fn reserve(&mut self, rel: &str) -> Result<(), FsError> {
        if self.done.inodes >= self.limits.max_inodes {
            return Err(FsError::TooManyInodes {
                path: rel.to_string(),
                max: self.limits.max_inodes,
            });
        }
        self.done.inodes += 1;
        self.charge(self.block, rel)
    }

    /// Charges the entry made as `st` what it holds beyond its reserved
    /// block: its allocated blocks (data, extent and directory blocks, a
    /// long symlink's target; ext4 counts delayed allocations there too).
    fn settle(&mut self, st: &FileStat, rel: &str) -> Result<(), FsError> {
        let held = u64::try_from(st.st_blocks).unwrap_or(0).saturating_mul(512);
        self.charge(held.saturating_sub(self.block), rel)
    }

    fn charge(&mut self, bytes: u64, rel: &str) -> Result<(), FsError> {
        let total = self.done.disk_bytes.saturating_add(bytes);
        if total > self.limits.max_bytes {
            return Err(FsError::TooLarge {
                path: rel.to_string(),
                max: self.limits.max_bytes,
            });
        }
        self.done.disk_bytes = total;
        Ok(())
    }

    fn bytes_left(&self) -> u64 {
        self.limits.max_bytes.saturating_sub(self.done.disk_bytes)
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

/// Removes `rel` (a file or a whole directory) beneath `root`, never
/// through a symlink.
fn remove_beneath(root: BorrowedFd<'_>, rel: &str) -> Result<(), FsError> {
    let (parent, base) = rel.rsplit_once('/').unwrap_or((".", rel));
    let p = sys::cstr(parent).map_err(io("opening", parent))?;
    let b = sys::cstr(base).map_err(io("removing", rel))?;
    remove(open_dir(root, &p)?.as_fd(), &b, rel, 0)
}

/// The block of the filesystem `fd` is on.
fn block_size(fd: BorrowedFd<'_>) -> u64 {
    match nix::sys::statvfs::fstatvfs(fd) {
        Ok(s) if s.fragment_size() > 0 => s.fragment_size(),
        _ => DEFAULT_BLOCK,
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
