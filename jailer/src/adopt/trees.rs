//! The session's workspace, and its `mounts/`, as detached mounts made in
//! the host's mount namespace for the adopted jail's init to attach in the
//! child's.

use crate::error::JailError;
use crate::{rootfs, sys};
use prims_protocol::jail::JobSpec;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;

/// Detached copies of the workspace (and its `mounts/`), made in the
/// host's mount namespace for the init to attach in the child's.
pub struct Trees {
    pub workspace: OwnedFd,
    pub mounts: Option<OwnedFd>,
}

/// The workspace as a detached mount (nosuid, nodev), and `mounts/`
/// beneath it read-only, opened without following a link.
pub fn open_trees(spec: &JobSpec) -> Result<Trees, JailError> {
    let tree = |dir: &OwnedFd, path: &PathBuf, attrs: u64| {
        let t = sys::open_tree_clone(dir.as_fd()).map_err(|errno| JailError::OpenTree {
            path: path.clone(),
            errno,
        })?;
        sys::mount_setattr_fd(t.as_fd(), attrs).map_err(|errno| JailError::OpenTree {
            path: path.clone(),
            errno,
        })?;
        Ok::<_, JailError>(t)
    };
    let ws = rootfs::open_dir(&spec.workspace)?;
    let workspace = tree(
        &ws,
        &spec.workspace,
        sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV,
    )?;
    let mounts_path = spec.workspace.join("mounts");
    let mounts = match rootfs::open_mounts_dir(&mounts_path)? {
        None => None,
        Some(dir) => Some(tree(
            &dir,
            &mounts_path,
            crate::mounts::RO | sys::MOUNT_ATTR_NOEXEC,
        )?),
    };
    Ok(Trees { workspace, mounts })
}
