//! A session on disk: `sessions/<name>/` (the workspace, a mount point in
//! loop mode), `sessions/<name>.img` (its quota image), `<name>.cells` (its
//! recorded runs), `<name>.run` (whether a run is in flight) and `<name>.json`,
//! where `<name>` is the keyed hash of the session id (see `key`).

use super::error::SessionError;
use super::history;
use super::meta;
use super::policy::QuotaMode;
use super::run_flag;
use crate::volume as image;
use std::fs;
use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Smallest image mke2fs makes with room to spare.
pub(super) const MIN_IMAGE_BYTES: u64 = 1 << 20;

pub(super) fn workspace(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

pub(super) fn image_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.img"))
}

/// Creates the directory of a new session (0700); fails if it exists.
pub(super) fn create_dir(dir: &Path, name: &str) -> Result<(), SessionError> {
    fs::DirBuilder::new()
        .mode(0o700)
        .create(workspace(dir, name))
        .map_err(SessionError::io("creating the workspace directory"))
}

/// Fills the directory of a new session: in loop mode a fresh image mounted
/// on it without `lost+found`, then `output/` and `mounts/`; everything
/// owned by `uid`, the root 0700. Returns the quota in bytes (0 when not
/// enforced). `keep` is `sessions.min_free_disk`, for the error when the
/// disk cannot hold the image. The caller removes the leftovers of a failure.
pub(super) fn build(
    dir: &Path,
    name: &str,
    uid: u32,
    mode: QuotaMode,
    quota: u64,
    keep: u64,
) -> Result<u64, SessionError> {
    let ws = workspace(dir, name);
    let quota = match mode {
        QuotaMode::None => 0,
        QuotaMode::Loop => {
            if quota < MIN_IMAGE_BYTES {
                return Err(SessionError::Workspace(format!(
                    "a disk quota of {quota} bytes is too small for an image (at least 1MiB)"
                )));
            }
            let img = image_path(dir, name);
            image::create(&img, quota, uid).map_err(|e| match e {
                image::VolumeError::NoSpace { .. } => SessionError::NoDisk {
                    quota,
                    keep,
                    free: free_bytes(dir),
                },
                e => SessionError::Workspace(e.to_string()),
            })?;
            image::mount_on(&img, &ws).map_err(|e| SessionError::Workspace(e.to_string()))?;
            match fs::remove_dir(ws.join("lost+found")) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(SessionError::io("removing lost+found")(e)),
            }
            quota
        }
    };
    std::os::unix::fs::lchown(&ws, Some(uid), Some(uid))
        .map_err(SessionError::io("chown of the workspace"))?;
    fs::set_permissions(&ws, fs::Permissions::from_mode(0o700))
        .map_err(SessionError::io("chmod of the workspace"))?;
    crate::workspace::prepare(&ws, uid, uid).map_err(|e| SessionError::Workspace(e.to_string()))?;
    Ok(quota)
}

/// Bytes an unprivileged writer could still put on `dir`'s filesystem.
pub(crate) fn free_bytes(dir: &Path) -> u64 {
    nix::sys::statvfs::statvfs(dir)
        .map(|s| s.blocks_available().saturating_mul(s.fragment_size()))
        .unwrap_or(0)
}

/// Mounts the image of a session loaded from disk again if it is not
/// mounted (after a reboot, or in a new mount namespace), checking it first.
pub(super) fn ensure_mounted(dir: &Path, name: &str) -> Result<bool, String> {
    let ws = workspace(dir, name);
    if crate::fsops::is_mount_point(&ws) {
        return Ok(false);
    }
    let img = image_path(dir, name);
    if !img.exists() {
        return Err("its quota image is gone".to_string());
    }
    match fs::DirBuilder::new().mode(0o700).create(&ws) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("creating the workspace directory: {e}")),
    }
    image::check(&img).map_err(|e| e.to_string())?;
    image::mount_on(&img, &ws).map_err(|e| e.to_string())?;
    Ok(true)
}

/// Removes everything of session `name`: unmounts the workspace, deletes it,
/// its image, then its metadata (last, so a crash part-way leaves a
/// session that the next start closes again). Idempotent. On success no
/// file of the session is left, so its uid may be reused.
pub(super) fn teardown(dir: &Path, name: &str) -> Result<(), String> {
    if !meta::is_valid_id(name) {
        return Err(format!("{name:?} is not a session name"));
    }
    let ws = workspace(dir, name);
    match fs::symlink_metadata(&ws) {
        Ok(_) => {
            image::unmount(&ws).map_err(|e| e.to_string())?;
            if let Err(e) = fs::remove_dir_all(&ws) {
                if e.kind() != ErrorKind::NotFound {
                    return Err(format!("removing the workspace: {e}"));
                }
            }
        }
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(format!("inspecting the workspace: {e}")),
    }
    for path in [
        image_path(dir, name),
        history::path(dir, name),
        history::tmp_path(dir, name),
        run_flag::path(dir, name),
        meta::meta_path(dir, name),
        meta::tmp_path(dir, name),
    ] {
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(format!("removing {}: {e}", path.display())),
        }
    }
    meta::sync_dir(dir).map_err(|e| format!("syncing the sessions directory: {e}"))?;
    // Only now may the uid go to another session: make sure.
    for path in [
        ws,
        image_path(dir, name),
        history::path(dir, name),
        run_flag::path(dir, name),
        meta::meta_path(dir, name),
    ] {
        if fs::symlink_metadata(&path).is_ok() {
            return Err(format!("{} is still there", path.display()));
        }
    }
    Ok(())
}

/// The owner of a leftover workspace directory, to keep its uid out of use
/// when the directory cannot be removed.
pub(super) fn owner(dir: &Path, name: &str) -> Option<u32> {
    fs::symlink_metadata(workspace(dir, name))
        .ok()
        .map(|m| m.uid())
        .filter(|&u| u != 0)
}
