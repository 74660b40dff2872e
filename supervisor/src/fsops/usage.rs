//! `disk_usage`: how much of its disk a workspace takes, in bytes and
//! inodes.

use super::sys::{self, NO_LINKS};
use nix::errno::Errno;
use nix::fcntl::AtFlags;
use nix::sys::stat::{fstatat, lstat, SFlag};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

/// Entries a walk looks at before it stops counting.
const MAX_WALK_ENTRIES: usize = 200_000;
const MAX_WALK_DEPTH: usize = 64;

/// What a workspace takes of its disk.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// Allocated bytes.
    pub bytes: u64,
    /// Inodes: one per file, directory, symlink or other entry.
    pub inodes: u64,
}

/// Bytes used by the workspace at `root`; see [`disk_usage`].
pub fn disk_used(root: &Path) -> u64 {
    disk_usage(root).bytes
}

/// What the workspace at `root` takes. When `root` is a mount point (a
/// quota image) this is the image's used blocks and inodes from statvfs,
/// so it counts everything the quota counts. Otherwise it is a walk
/// summing allocated blocks and counting entries, bounded at 200,000
/// entries and depth 64 (a lower bound beyond that), never following
/// symlinks. Errors count as 0 and are logged.
pub fn disk_usage(root: &Path) -> Usage {
    if is_mount_point(root) {
        return match nix::sys::statvfs::statvfs(root) {
            Ok(s) => Usage {
                bytes: s
                    .blocks()
                    .saturating_sub(s.blocks_free())
                    .saturating_mul(s.fragment_size()),
                inodes: s.files().saturating_sub(s.files_free()),
            },
            Err(e) => {
                tracing::warn!(root = %root.display(), error = %e, "statvfs of a workspace failed");
                Usage::default()
            }
        };
    }
    let root_fd = match super::root::open_root(root) {
        Ok(fd) => fd,
        Err(e) => {
            tracing::warn!(root = %root.display(), error = %e, "cannot measure a workspace");
            return Usage::default();
        }
    };
    let mut budget = MAX_WALK_ENTRIES;
    let mut usage = Usage::default();
    if let Ok(dir) = open_dir(root_fd.as_fd(), c".") {
        walk(dir.as_fd(), 0, &mut budget, &mut usage);
    }
    usage
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

fn walk(dir: BorrowedFd<'_>, depth: usize, budget: &mut usize, usage: &mut Usage) {
    let Ok((names, _)) = sys::read_dir(dir, *budget) else {
        return;
    };
    for name in names {
        if *budget == 0 {
            break;
        }
        *budget -= 1;
        let Ok(st) = fstatat(dir, name.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW) else {
            continue;
        };
        usage.inodes += 1;
        let held = u64::try_from(st.st_blocks).unwrap_or(0).saturating_mul(512);
        usage.bytes = usage.bytes.saturating_add(held);
        let is_dir = SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) == SFlag::S_IFDIR;
        if is_dir && depth < MAX_WALK_DEPTH {
            if let Ok(sub) = open_dir(dir, &name) {
                walk(sub.as_fd(), depth + 1, budget, usage);
            }
        }
    }
}

/// The block of the filesystem `dir` is on (statvfs `f_frsize`; 4096
/// when it does not say): the least a copy charges an entry there.
pub fn block_size(dir: &Path) -> u64 {
    match nix::sys::statvfs::statvfs(dir) {
        Ok(s) if s.fragment_size() > 0 => s.fragment_size(),
        _ => 4096,
    }
}
