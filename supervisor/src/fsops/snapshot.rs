//! `snapshot_output` and `diff`: which files under `output/` a run made or
//! changed.

use super::error::FsError;
use super::root::open_root;
use super::sys::{self, NO_LINKS};
use nix::errno::Errno;
use nix::fcntl::AtFlags;
use nix::sys::stat::{fstatat, SFlag};
use prims_protocol::wire::OutputFile;
use std::collections::BTreeMap;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;

/// Directories below `output/` deeper than this are not walked.
pub(crate) const MAX_OUTPUT_DEPTH: usize = 32;
/// Files recorded at most; the walk stops there.
pub(crate) const MAX_OUTPUT_FILES: usize = 10_000;
/// Directory entries looked at in total (so empty-directory mazes end too).
const MAX_VISITED: usize = 100_000;

/// The regular files under `output/` at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Path relative to `output/` to what identifies this version of it.
    files: BTreeMap<String, Stamp>,
    /// True when a bound (depth, file count, entries visited) cut the walk
    /// short, so some files are missing.
    pub truncated: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
    ino: u64,
}

impl Snapshot {
    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The recorded paths, relative to `output/`, sorted.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.files.keys().map(String::as_str)
    }
}

/// Every regular file under `output/` of the workspace at `root`, walked
/// through fds without following any symlink (symlinks, FIFOs, sockets
/// and devices are skipped). Bounded at depth 32, 10,000 files and 100,000
/// entries; `truncated` says when a bound was hit. An `output` that is
/// missing, or that the code replaced with a symlink or a file, is an
/// empty snapshot.
pub fn snapshot_output(root: &Path) -> Result<Snapshot, FsError> {
    let root_fd = open_root(root)?;
    let mut snap = Snapshot::default();
    let out = match open_dir(root_fd.as_fd(), c"output") {
        Ok(fd) => fd,
        Err(Errno::ENOENT | Errno::ELOOP | Errno::ENOTDIR | Errno::EXDEV) => {
            tracing::warn!(root = %root.display(), "output/ is missing or not a directory");
            return Ok(snap);
        }
        Err(e) => return Err(FsError::from_errno("opening", "output", e)),
    };
    let mut visited = 0;
    walk(out.as_fd(), "", 0, &mut snap, &mut visited)?;
    Ok(snap)
}

fn open_dir(dir: BorrowedFd<'_>, name: &std::ffi::CStr) -> Result<std::os::fd::OwnedFd, Errno> {
    sys::openat2(dir, name, libc::O_RDONLY | libc::O_DIRECTORY, 0, NO_LINKS)
}

fn walk(
    dir: BorrowedFd<'_>,
    prefix: &str,
    depth: usize,
    snap: &mut Snapshot,
    visited: &mut usize,
) -> Result<(), FsError> {
    let shown = format!("output/{prefix}");
    let (names, more) = sys::read_dir(dir, MAX_VISITED - *visited)
        .map_err(|e| FsError::from_errno("reading", &shown, e))?;
    snap.truncated |= more;
    for name in names {
        *visited += 1;
        let st = match fstatat(dir, name.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(Errno::ENOENT) => continue,
            Err(e) => return Err(FsError::from_errno("stat", &shown, e)),
        };
        let path = format!("{prefix}{}", sys::display(&name));
        match SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) {
            SFlag::S_IFREG => {
                if snap.files.len() >= MAX_OUTPUT_FILES {
                    snap.truncated = true;
                    return Ok(());
                }
                let stamp = Stamp {
                    size: u64::try_from(st.st_size).unwrap_or(0),
                    mtime_ns: sys::ns(st.st_mtime, st.st_mtime_nsec),
                    ctime_ns: sys::ns(st.st_ctime, st.st_ctime_nsec),
                    ino: st.st_ino,
                };
                snap.files.insert(path, stamp);
            }
            SFlag::S_IFDIR if depth + 1 >= MAX_OUTPUT_DEPTH => snap.truncated = true,
            SFlag::S_IFDIR => {
                let sub = match open_dir(dir, &name) {
                    Ok(fd) => fd,
                    Err(Errno::ENOENT | Errno::ELOOP | Errno::ENOTDIR) => continue,
                    Err(e) => return Err(FsError::from_errno("opening", &path, e)),
                };
                walk(sub.as_fd(), &format!("{path}/"), depth + 1, snap, visited)?;
                if snap.files.len() >= MAX_OUTPUT_FILES && snap.truncated {
                    return Ok(());
                }
            }
            _ => {}
        }
        if *visited >= MAX_VISITED {
            snap.truncated = true;
            return Ok(());
        }
    }
    Ok(())
}

/// Every file of `after`, sorted by path, with `changed` set when it is new
/// since `before` or differs in size, mtime, ctime or inode. The MIME type
/// is guessed from the extension (application/octet-stream otherwise).
pub fn diff(before: &Snapshot, after: &Snapshot) -> Vec<OutputFile> {
    after
        .files
        .iter()
        .map(|(path, stamp)| OutputFile {
            path: path.clone(),
            size: stamp.size,
            mime: mime_guess::from_path(path)
                .first_or_octet_stream()
                .essence_str()
                .to_string(),
            changed: before.files.get(path) != Some(stamp),
        })
        .collect()
}
