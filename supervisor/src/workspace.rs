//! Workspace directories on the host: `output/` and `mounts/`, owned by the
//! host uid that the jail's user maps to.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("workspace {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("workspace {0} is not a directory")]
    NotADirectory(PathBuf),
    #[error("workspace {0} contains a symlink where a directory belongs")]
    Symlink(PathBuf),
    #[error(
        "cannot give workspace {path} to host uid {uid}: this user namespace has no such uid \
         (inside a container or user namespace, map the whole identity.uid_base..+uid_count \
         range, or run PRIMS on the host)"
    )]
    UidNotMapped { path: PathBuf, uid: u32 },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> WorkspaceError + '_ {
    move |source| WorkspaceError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Make `dir` (which must exist) a workspace the jail user can write.
pub(crate) fn prepare(dir: &Path, uid: u32, gid: u32) -> Result<(), WorkspaceError> {
    let meta = std::fs::symlink_metadata(dir).map_err(io_err(dir))?;
    if !meta.is_dir() {
        return Err(WorkspaceError::NotADirectory(dir.to_path_buf()));
    }
    chown_if_needed(dir, &meta, uid, gid)?;
    for sub in ["output", "mounts"] {
        let p = dir.join(sub);
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => return Err(WorkspaceError::Symlink(p)),
            Ok(m) if m.is_dir() => chown_if_needed(&p, &m, uid, gid)?,
            Ok(_) => return Err(WorkspaceError::NotADirectory(p)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                std::fs::create_dir(&p).map_err(io_err(&p))?;
                let m = std::fs::symlink_metadata(&p).map_err(io_err(&p))?;
                chown_if_needed(&p, &m, uid, gid)?;
            }
            Err(e) => return Err(io_err(&p)(e)),
        }
    }
    Ok(())
}

fn chown_if_needed(
    p: &Path,
    m: &std::fs::Metadata,
    uid: u32,
    gid: u32,
) -> Result<(), WorkspaceError> {
    if m.uid() == uid && m.gid() == gid {
        return Ok(());
    }
    // lchown: never follow a link planted in the workspace.
    std::os::unix::fs::lchown(p, Some(uid), Some(gid)).map_err(|e| {
        if e.raw_os_error() == Some(libc::EINVAL) {
            WorkspaceError::UidNotMapped {
                path: p.to_path_buf(),
                uid,
            }
        } else {
            io_err(p)(e)
        }
    })
}
