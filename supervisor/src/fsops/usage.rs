//! `disk_used`: how much of its disk a workspace takes.

use super::sys::{self, NO_LINKS};
use nix::errno::Errno;
use nix::fcntl::AtFlags;
use nix::sys::stat::{fstatat, lstat, SFlag};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

/// Entries a walk looks at before it stops counting.
const MAX_WALK_ENTRIES: usize = 200_000;
const MAX_WALK_DEPTH: usize = 64;

/// Bytes used by the workspace at `root`. When `root` is a mount point (a
/// quota image) this is the image's used blocks from statvfs, so it counts
/// everything the quota counts. Otherwise it is a walk summing allocated
/// blocks, bounded at 200,000 entries and depth 64 (a lower bound beyond
/// that), never following symlinks. Errors count as 0 and are logged.
pub fn disk_used(root: &Path) -> u64 {
    if is_mount_point(root) {
        return match nix::sys::statvfs::statvfs(root) {
            Ok(s) => {
                let used = s.blocks().saturating_sub(s.blocks_free());
                used.saturating_mul(s.fragment_size())
            }
            Err(e) => {
                tracing::warn!(root = %root.display(), error = %e, "statvfs of a workspace failed");
                0
            }
        };
    }
    let root_fd = match super::root::open_root(root) {
        Ok(fd) => fd,
        Err(e) => {
            tracing::warn!(root = %root.display(), error = %e, "cannot measure a workspace");
            return 0;
        }
    };
    let mut budget = MAX_WALK_ENTRIES;
    match open_dir(root_fd.as_fd(), c".") {
        Ok(dir) => walk(dir.as_fd(), 0, &mut budget),
        Err(_) => 0,
    }
}

/// True when `dir` is on another filesystem than its parent.
pub(crate) fn is_mount_point(dir: &Path) -> bool {
    let Some(parent) = dir.parent() else {
        return true;
    };
    match (lstat(dir), lstat(parent)) {
        (Ok(a), Ok(b)) => a.st_dev != b.st_dev,
        _ => false,
    }
}

fn open_dir(dir: BorrowedFd<'_>, name: &std::ffi::CStr) -> Result<OwnedFd, Errno> {
    sys::openat2(dir, name, libc::O_RDONLY | libc::O_DIRECTORY, 0, NO_LINKS)
}

fn walk(dir: BorrowedFd<'_>, depth: usize, budget: &mut usize) -> u64 {
    let Ok((names, _)) = sys::read_dir(dir, *budget) else {
        return 0;
    };
    let mut total = 0u64;
    for name in names {
        if *budget == 0 {
            break;
        }
        *budget -= 1;
        let Ok(st) = fstatat(dir, name.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW) else {
            continue;
        };
        total = total.saturating_add(u64::try_from(st.st_blocks).unwrap_or(0) * 512);
        let is_dir = SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) == SFlag::S_IFDIR;
        if is_dir && depth < MAX_WALK_DEPTH {
            if let Ok(sub) = open_dir(dir, &name) {
                total = total.saturating_add(walk(sub.as_fd(), depth + 1, budget));
            }
        }
    }
    total
}
