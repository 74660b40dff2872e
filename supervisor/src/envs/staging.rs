//! A build's own volume: an ext4 image of `python.build_disk` bytes,
//! reserved in full, loop-mounted at `state_dir/builds/<id>/`. Everything
//! a build writes lands on it: the staging venv, uv's working directory and
//! the upper layer of the package cache's overlay. A build that writes more
//! gets ENOSPC; the host's disk never fills. The volume goes when the build
//! is over, and whatever a crash left is removed at the next start.

use super::error::EnvError;
use crate::volume;
use std::fs;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

pub(super) struct BuildVolume {
    image: PathBuf,
    dir: PathBuf,
    cache_mounted: bool,
}

fn builds_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("builds")
}

/// Removes the volumes of builds a crash interrupted.
pub(super) fn clean_leftovers(state_dir: &Path) {
    let dir = builds_dir(state_dir);
    let Ok(rd) = fs::read_dir(&dir) else { return };
    for ent in rd.flatten() {
        let path = ent.path();
        if ent.file_type().is_ok_and(|t| t.is_dir()) {
            let _ = volume::unmount(&path.join("cache"));
            let _ = volume::unmount(&path);
        }
        tracing::info!(path = %path.display(), "removing what an interrupted build left");
        super::cache::remove_any(&path);
    }
}

impl BuildVolume {
    /// Makes and mounts a volume of `size` bytes whose root, and the
    /// directories in it, belong to `uid`.
    pub(super) fn create(state_dir: &Path, size: u64, uid: u32) -> Result<BuildVolume, EnvError> {
        let parent = builds_dir(state_dir);
        match fs::DirBuilder::new().mode(0o711).create(&parent) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(EnvError::io("creating", &parent)(e)),
        }
        let id = super::cache::rand_hex();
        let image = parent.join(format!("{id}.img"));
        let dir = parent.join(&id);
        volume::create(&image, size, uid)
            .map_err(EnvError::volume("the build volume (python.build_disk)"))?;
        let vol = BuildVolume {
            image,
            dir,
            cache_mounted: false,
        };
        fs::DirBuilder::new()
            .mode(0o755)
            .create(&vol.dir)
            .map_err(EnvError::io("creating", &vol.dir))?;
        volume::mount_on(&vol.image, &vol.dir).map_err(|e| EnvError::Build {
            message: format!("mounting the build volume: {e}"),
        })?;
        let _ = fs::remove_dir(vol.dir.join("lost+found"));
        for sub in ["work", "cache", "cache-upper", "cache-work"] {
            let p = vol.dir.join(sub);
            fs::DirBuilder::new()
                .mode(0o755)
                .create(&p)
                .map_err(EnvError::io("creating", &p))?;
            chown(&p, uid)?;
        }
        Ok(vol)
    }

    pub(super) fn venv(&self) -> PathBuf {
        self.dir.join("venv")
    }

    pub(super) fn work(&self) -> PathBuf {
        self.dir.join("work")
    }

    /// The package cache as the install jail sees it (the overlay).
    pub(super) fn cache(&self) -> PathBuf {
        self.dir.join("cache")
    }

    /// What the build added to the package cache.
    pub(super) fn cache_upper(&self) -> PathBuf {
        self.dir.join("cache-upper")
    }

    /// Mounts the overlay of `lower` (the shared package cache, which the
    /// build never writes) on `cache()`.
    pub(super) fn mount_cache(&mut self, lower: &Path) -> Result<(), EnvError> {
        let opts = format!(
            "lowerdir={},upperdir={},workdir={},redirect_dir=off,index=off,metacopy=off,xino=off",
            option_path(lower)?,
            option_path(&self.cache_upper())?,
            option_path(&self.dir.join("cache-work"))?,
        );
        let flags = nix::mount::MsFlags::MS_NOSUID | nix::mount::MsFlags::MS_NODEV;
        nix::mount::mount(
            Some("prims-pkgcache"),
            &self.cache(),
            Some("overlay"),
            flags,
            Some(opts.as_str()),
        )
        .map_err(|e| EnvError::Build {
            message: format!("mounting the package cache overlay: {e}"),
        })?;
        self.cache_mounted = true;
        Ok(())
    }

    pub(super) fn unmount_cache(&mut self) {
        if self.cache_mounted {
            if let Err(e) = volume::unmount(&self.cache()) {
                tracing::warn!(error = %e, "unmounting the package cache overlay");
            }
            self.cache_mounted = false;
        }
    }
}

impl Drop for BuildVolume {
    fn drop(&mut self) {
        self.unmount_cache();
        if let Err(e) = volume::unmount(&self.dir) {
            tracing::warn!(error = %e, dir = %self.dir.display(), "unmounting a build volume");
        }
        super::cache::remove_any(&self.dir);
        super::cache::remove_any(&self.image);
    }
}

/// A path as an overlay mount option: the option syntax has no escape for
/// `,` and `:`, so paths holding them are refused.
fn option_path(p: &Path) -> Result<String, EnvError> {
    let s = p.to_str().unwrap_or(",");
    if s.contains([',', ':', '\\', '\n']) {
        return Err(EnvError::Policy {
            message: format!(
                "{} holds a character an overlay mount cannot take (, : \\); choose another state directory",
                p.display()
            ),
        });
    }
    Ok(s.to_string())
}

pub(super) fn chown(path: &Path, uid: u32) -> Result<(), EnvError> {
    std::os::unix::fs::lchown(path, Some(uid), Some(uid)).map_err(EnvError::io("chowning", path))
}

pub(super) fn chown_tree(dir: &Path, uid: u32) -> Result<(), EnvError> {
    chown(dir, uid)?;
    let rd = fs::read_dir(dir).map_err(EnvError::io("reading", dir))?;
    for ent in rd {
        let ent = ent.map_err(EnvError::io("reading", dir))?;
        let path = ent.path();
        if ent.file_type().is_ok_and(|t| t.is_dir()) {
            chown_tree(&path, uid)?;
        } else {
            chown(&path, uid)?;
        }
    }
    Ok(())
}
