//! `read_file`: a chunk of one regular file of the workspace.

use super::error::FsError;
use super::path::RelPath;
use super::root::open_root;
use super::sys::{self, BENEATH};
use nix::sys::stat::{fstat, SFlag};
use prims_protocol::wire::{FileData, MAX_CHUNK_BYTES};
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Up to `limit` bytes (capped at `MAX_CHUNK_BYTES`) of the regular file
/// `rel` (relative to the workspace root), from `offset`.
///
/// Symlinks are followed only while they stay inside the workspace: a link
/// to an absolute path, or one whose `..` climbs above the root, is refused
/// as Forbidden before anything is opened outside. Anything but a regular
/// file (directory, FIFO, socket, device) is refused; the open is
/// non-blocking so a planted FIFO cannot hang the supervisor.
pub fn read_file(root: &Path, rel: &str, offset: u64, limit: u64) -> Result<FileData, FsError> {
    let rel = RelPath::parse(rel)?;
    let shown = rel.as_string();
    if rel.is_root() {
        return Err(FsError::NotAFile(shown));
    }
    let root_fd = open_root(root)?;
    let fd = sys::openat2(
        root_fd.as_fd(),
        &rel.to_cstring()?,
        libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY,
        0,
        BENEATH,
    )
    .map_err(|e| FsError::from_errno("opening", &shown, e))?;
    let st = fstat(fd.as_fd()).map_err(|e| FsError::from_errno("stat", &shown, e))?;
    if SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) != SFlag::S_IFREG {
        return Err(FsError::NotAFile(shown));
    }
    let size = u64::try_from(st.st_size).unwrap_or(0);
    let want = limit
        .min(MAX_CHUNK_BYTES as u64)
        .min(size.saturating_sub(offset));
    let mut data = vec![0u8; want as usize];
    let file = std::fs::File::from(fd);
    let mut got = 0usize;
    while got < data.len() {
        match file.read_at(&mut data[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                let errno = nix::errno::Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO));
                return Err(FsError::from_errno("reading", &shown, errno));
            }
        }
    }
    data.truncate(got);
    let eof = offset.saturating_add(got as u64) >= size;
    Ok(FileData { data, size, eof })
}
