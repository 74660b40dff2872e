//! `list_dir`: one directory of the workspace, symlinks shown, not followed.

use super::error::FsError;
use super::path::RelPath;
use super::root::open_root;
use super::sys::{self, BENEATH};
use nix::errno::Errno;
use nix::fcntl::AtFlags;
use nix::sys::stat::{fstatat, FileStat, SFlag};
use prims_protocol::wire::{DirEntry, EntryKind};
use std::os::fd::AsFd;
use std::path::Path;

/// A directory with more entries than this is an error, not a huge reply.
pub const MAX_DIR_ENTRIES: usize = 10_000;

/// The entries of `rel` (relative to the workspace root `root`; "" or "."
/// is the root), sorted by name. Entry paths are relative to the root. The
/// directory itself may be reached through a symlink that stays inside the
/// workspace; entries are `lstat`ed, so a symlink is listed as `symlink`
/// with the size of its target string and never followed.
pub fn list_dir(root: &Path, rel: &str) -> Result<Vec<DirEntry>, FsError> {
    let rel = RelPath::parse(rel)?;
    let shown = rel.as_string();
    let root_fd = open_root(root)?;
    let dir = sys::openat2(
        root_fd.as_fd(),
        &rel.to_cstring()?,
        libc::O_RDONLY | libc::O_DIRECTORY,
        0,
        BENEATH,
    )
    .map_err(|e| FsError::from_errno("opening", &shown, e))?;
    let (names, more) = sys::read_dir(dir.as_fd(), MAX_DIR_ENTRIES)
        .map_err(|e| FsError::from_errno("reading", &shown, e))?;
    if more {
        return Err(FsError::TooMany {
            path: shown,
            max: MAX_DIR_ENTRIES,
        });
    }
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let st = match fstatat(dir.as_fd(), name.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            // Deleted since the directory was read.
            Err(Errno::ENOENT) => continue,
            Err(e) => return Err(FsError::from_errno("stat", &shown, e)),
        };
        let name = sys::display(&name);
        let path = if rel.is_root() {
            name.clone()
        } else {
            format!("{shown}/{name}")
        };
        out.push(DirEntry {
            name,
            path,
            kind: kind(&st),
            size: u64::try_from(st.st_size).unwrap_or(0),
            modified: u64::try_from(st.st_mtime).unwrap_or(0),
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

pub(crate) fn kind(st: &FileStat) -> EntryKind {
    match SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) {
        SFlag::S_IFREG => EntryKind::File,
        SFlag::S_IFDIR => EntryKind::Directory,
        SFlag::S_IFLNK => EntryKind::Symlink,
        _ => EntryKind::Other,
    }
}
