//! `write_mount`: a file placed read-only under `mounts/`, all or nothing.

use super::error::FsError;
use super::path::RelPath;
use super::root::open_root;
use super::sys::{self, NO_LINKS};
use nix::errno::Errno;
use nix::fcntl::renameat;
use nix::sys::stat::{fchmod, mkdirat, Mode};
use nix::unistd::{fchown, fsync, unlinkat, Gid, Uid, UnlinkatFlags};
use prims_protocol::wire::MountSize;
use std::ffi::CString;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

/// Writes `mounts/<rel>` of the workspace at `root` from `chunks`, which must
/// add up to exactly `size` bytes, and returns `size`.
///
/// Blocking: call it from `spawn_blocking`. From async code, feed it a
/// `std::sync::mpsc::Receiver<Vec<u8>>` (`rx.into_iter()`) or wrap a tokio
/// receiver as `std::iter::from_fn(|| rx.blocking_recv())`; dropping the
/// sender ends the iterator, so a cancelled upload is a short one.
///
/// Missing directories under `mounts/` are created (0755, owned by `uid`).
/// No symlink is followed anywhere on the way, `mounts` included. The data
/// goes to a hidden temporary file in the target directory; only when the
/// byte count matches `size` is it fsynced, made 0444 and owned by `uid`,
/// and renamed over the target. A short, long or failed (ENOSPC) upload
/// removes the temporary file and leaves any earlier file untouched. A
/// `size` larger than the free space is refused before anything is written.
pub fn write_mount<I>(
    root: &Path,
    rel: &str,
    size: u64,
    chunks: I,
    uid: u32,
) -> Result<u64, FsError>
where
    I: IntoIterator<Item = Vec<u8>>,
{
    write(root, rel, MountSize::Exact(size), chunks, uid, || true)
}

/// [`write_mount`] for an upload whose size is not known in advance (a
/// download without Content-Length): at most `max` bytes, and returns how
/// many arrived.
///
/// An iterator that ends is only a complete file if `complete()` says so
/// when asked, right after the last chunk: the sender said it was done,
/// rather than being cancelled or disconnected. A body past `max`, one cut
/// short, or a full disk (found while writing: there is no size to check
/// first) removes the temporary file and leaves any earlier file untouched.
pub fn write_mount_up_to<I, F>(
    root: &Path,
    rel: &str,
    max: u64,
    chunks: I,
    uid: u32,
    complete: F,
) -> Result<u64, FsError>
where
    I: IntoIterator<Item = Vec<u8>>,
    F: FnOnce() -> bool,
{
    write(root, rel, MountSize::AtMost(max), chunks, uid, complete)
}

fn write<I, F>(
    root: &Path,
    rel: &str,
    size: MountSize,
    chunks: I,
    uid: u32,
    complete: F,
) -> Result<u64, FsError>
where
    I: IntoIterator<Item = Vec<u8>>,
    F: FnOnce() -> bool,
{
    let rel = RelPath::parse(rel)?;
    let shown = rel.under("mounts");
    let Some((file_name, dirs)) = rel.parts().split_last() else {
        return Err(FsError::BadPath {
            path: shown,
            reason: "names no file (give a path under mounts/, e.g. \"data.csv\")",
        });
    };
    let at = shown.as_str();
    let err = |op| move |e| FsError::from_errno(op, at, e);
    let root_fd = open_root(root)?;
    let mut dir = open_dir(root_fd.as_fd(), c"mounts").map_err(err("opening"))?;
    for name in dirs {
        let c = sys::cstr(name).map_err(err("creating"))?;
        let created = match mkdirat(dir.as_fd(), c.as_c_str(), Mode::from_bits_truncate(0o755)) {
            Ok(()) => true,
            Err(Errno::EEXIST) => false,
            Err(e) => return Err(err("creating")(e)),
        };
        let sub = open_dir(dir.as_fd(), &c).map_err(err("opening"))?;
        if created {
            fchown(
                sub.as_fd(),
                Some(Uid::from_raw(uid)),
                Some(Gid::from_raw(uid)),
            )
            .map_err(err("chown"))?;
        }
        dir = sub;
    }
    if let MountSize::Exact(size) = size {
        let free = nix::sys::statvfs::fstatvfs(dir.as_fd()).map_err(err("statvfs"))?;
        if size > free.blocks_available().saturating_mul(free.fragment_size()) {
            return Err(FsError::NoSpace(shown.clone()));
        }
    }

    let final_name = sys::cstr(file_name).map_err(err("creating"))?;
    let (tmp, fd) = Temp::create(&dir).map_err(err("creating"))?;
    let mut file = std::fs::File::from(fd);
    let mut got = 0u64;
    for chunk in chunks {
        got = got.saturating_add(chunk.len() as u64);
        if got > size.limit() {
            break;
        }
        file.write_all(&chunk)
            .map_err(|e| err("writing")(io_errno(&e)))?;
    }
    match size {
        MountSize::Exact(expected) if got != expected => {
            return Err(FsError::SizeMismatch {
                path: shown.clone(),
                expected,
                got,
            });
        }
        MountSize::AtMost(max) if got > max => {
            return Err(FsError::TooLarge {
                path: shown.clone(),
                max,
            });
        }
        _ => {}
    }
    if !complete() {
        return Err(FsError::Incomplete {
            path: shown.clone(),
            got,
        });
    }
    file.sync_all().map_err(|e| err("writing")(io_errno(&e)))?;
    fchown(
        file.as_fd(),
        Some(Uid::from_raw(uid)),
        Some(Gid::from_raw(uid)),
    )
    .map_err(err("chown"))?;
    fchmod(file.as_fd(), Mode::from_bits_truncate(0o444)).map_err(err("chmod"))?;
    renameat(
        dir.as_fd(),
        tmp.name.as_c_str(),
        dir.as_fd(),
        final_name.as_c_str(),
    )
    .map_err(err("renaming"))?;
    tmp.keep();
    // The rename is durable once the directory is; the data already is.
    let _ = fsync(dir.as_fd());
    Ok(got)
}

fn open_dir(dir: std::os::fd::BorrowedFd<'_>, name: &std::ffi::CStr) -> Result<OwnedFd, Errno> {
    sys::openat2(dir, name, libc::O_RDONLY | libc::O_DIRECTORY, 0, NO_LINKS)
}

fn io_errno(e: &std::io::Error) -> Errno {
    Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
}

/// A hidden temporary file, removed on drop unless kept.
struct Temp<'a> {
    dir: &'a OwnedFd,
    name: CString,
    kept: bool,
}

impl<'a> Temp<'a> {
    fn create(dir: &'a OwnedFd) -> Result<(Temp<'a>, OwnedFd), Errno> {
        let mut tries = 0;
        loop {
            let mut rand = [0u8; 8];
            getrandom::fill(&mut rand).map_err(|_| Errno::EIO)?;
            let name = sys::cstr(&format!(".prims-upload-{}", hex::encode(rand)))?;
            let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL;
            match sys::openat2(dir.as_fd(), &name, flags, 0o600, NO_LINKS) {
                Ok(fd) => {
                    let tmp = Temp {
                        dir,
                        name,
                        kept: false,
                    };
                    return Ok((tmp, fd));
                }
                Err(Errno::EEXIST) if tries < 8 => tries += 1,
                Err(e) => return Err(e),
            }
        }
    }

    fn keep(mut self) {
        self.kept = true;
    }
}

impl Drop for Temp<'_> {
    fn drop(&mut self) {
        if !self.kept {
            let _ = unlinkat(
                self.dir.as_fd(),
                self.name.as_c_str(),
                UnlinkatFlags::NoRemoveDir,
            );
        }
    }
}
