//! The on-disk cache of built environments and its in-memory index.
//!
//! Layout under `state_dir/envs/`: `<key>.img` is a venv frozen into a
//! read-only ext4 image, mounted read-only on `<key>/`; `<key>.json` is its
//! metadata. A build writes the metadata first and then renames the image
//! into place, so the image's presence is the commit point; `.build-*` (a
//! build in progress) and `.trash-*` (an environment being deleted) are
//! leftovers when the process is not running.

use super::error::EnvError;
use super::key::is_key;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How often a cache hit may rewrite the metadata file to record its use.
const TOUCH_WRITE_INTERVAL: Duration = Duration::from_secs(60);

pub(super) const BUILD_PREFIX: &str = ".build-";
pub(super) const TRASH_PREFIX: &str = ".trash-";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(super) struct Meta {
    pub key: String,
    /// What the caller asked for, normalized.
    pub requirements: Vec<String>,
    /// What was installed: the policy's default packages plus `requirements`.
    pub packages: Vec<String>,
    pub interpreter: PathBuf,
    pub version: String,
    pub size_bytes: u64,
    /// Unix time in milliseconds.
    pub created_ms: u64,
    pub last_used_ms: u64,
    pub build_ms: u64,
}

#[derive(Debug)]
pub(super) struct Entry {
    pub meta: Meta,
    /// Live `EnvLease`s; an entry with any is never collected.
    pub leases: usize,
    /// When `meta` was last written to disk.
    pub written: Instant,
}

#[derive(Debug, Default)]
pub(super) struct Index {
    pub entries: HashMap<String, Entry>,
}

/// 16 random hex digits for temporary names.
pub(super) fn rand_hex() -> String {
    let mut b = [0u8; 8];
    if getrandom::fill(&mut b).is_err() {
        let n = now_ms() ^ u64::from(std::process::id());
        b = n.to_le_bytes();
    }
    hex::encode(b)
}

pub(super) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

pub(super) fn meta_path(envs_dir: &Path, key: &str) -> PathBuf {
    envs_dir.join(format!("{key}.json"))
}

pub(super) fn image_path(envs_dir: &Path, key: &str) -> PathBuf {
    envs_dir.join(format!("{key}.img"))
}

/// Renames a finished image into place and mounts it, read-only, on
/// `envs_dir/<key>/`.
pub(super) fn install_image(envs_dir: &Path, key: &str, image: &Path) -> Result<(), EnvError> {
    let dest = image_path(envs_dir, key);
    std::fs::rename(image, &dest).map_err(EnvError::io("renaming into place", &dest))?;
    if let Err(e) = mount(envs_dir, key) {
        remove_any(&dest);
        return Err(e);
    }
    Ok(())
}

/// Mounts `<key>.img` on `<key>/` unless it is mounted there already.
fn mount(envs_dir: &Path, key: &str) -> Result<(), EnvError> {
    let dir = envs_dir.join(key);
    if crate::fsops::is_mount_point(&dir) {
        return Ok(());
    }
    match std::fs::create_dir(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(EnvError::io("creating", &dir)(e)),
    }
    crate::volume::mount_read_only(&image_path(envs_dir, key), &dir).map_err(|e| EnvError::Build {
        message: format!("mounting environment {key}: {e}"),
    })
}

/// Unmounts and removes everything of `key`.
pub(super) fn remove_env(envs_dir: &Path, key: &str) {
    let dir = envs_dir.join(key);
    if let Err(e) = crate::volume::unmount(&dir) {
        tracing::warn!(key, error = %e, "unmounting an environment");
    }
    for p in [dir, image_path(envs_dir, key), meta_path(envs_dir, key)] {
        remove_any(&p);
    }
}

/// Write metadata through a temporary file and a rename.
pub(super) fn write_meta(envs_dir: &Path, meta: &Meta) -> Result<(), EnvError> {
    let path = meta_path(envs_dir, &meta.key);
    let tmp = envs_dir.join(format!("{BUILD_PREFIX}{}.json.tmp", meta.key));
    let json = serde_json::to_vec_pretty(meta).map_err(|e| EnvError::Jail {
        message: format!("encoding metadata: {e}"),
    })?;
    std::fs::write(&tmp, json).map_err(EnvError::io("writing", &tmp))?;
    std::fs::rename(&tmp, &path).map_err(EnvError::io("renaming into place", &path))
}

/// Remove a file or a directory tree; a missing path is fine.
pub(super) fn remove_any(path: &Path) {
    let res = match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(_) => return,
    };
    if let Err(e) = res {
        tracing::warn!(path = %path.display(), error = %e, "could not remove");
    }
}

impl Index {
    /// Scan `envs_dir`: remove build and trash leftovers and orphans, and
    /// index every complete environment.
    pub(super) fn load(envs_dir: &Path) -> Result<Index, EnvError> {
        let mut index = Index::default();
        let mut dirs = Vec::new();
        let mut metas = Vec::new();
        let mut images = std::collections::HashSet::new();
        let rd = std::fs::read_dir(envs_dir).map_err(EnvError::io("reading", envs_dir))?;
        for ent in rd {
            let ent = ent.map_err(EnvError::io("reading", envs_dir))?;
            let name = ent.file_name().to_string_lossy().into_owned();
            let path = ent.path();
            if name.starts_with(BUILD_PREFIX) || name.starts_with(TRASH_PREFIX) {
                tracing::info!(path = %path.display(), "removing a leftover of an interrupted build or delete");
                let _ = crate::volume::unmount(&path);
                remove_any(&path);
            } else if let Some(key) = name.strip_suffix(".json").filter(|k| is_key(k)) {
                metas.push((key.to_string(), path));
            } else if let Some(key) = name.strip_suffix(".img").filter(|k| is_key(k)) {
                images.insert(key.to_string());
            } else if is_key(&name) {
                dirs.push(name);
            }
        }
        for (key, path) in metas {
            // An environment of an earlier layout is a directory, no image.
            let meta = std::fs::read(&path)
                .ok()
                .and_then(|b| serde_json::from_slice::<Meta>(&b).ok())
                .filter(|m| m.key == key && images.contains(&key))
                .filter(|_| match mount(envs_dir, &key) {
                    Ok(()) => true,
                    Err(e) => {
                        tracing::warn!(key, error = %e, "an environment image cannot be mounted");
                        false
                    }
                });
            match meta {
                Some(meta) => {
                    index.entries.insert(
                        key,
                        Entry {
                            meta,
                            leases: 0,
                            written: Instant::now(),
                        },
                    );
                }
                None => {
                    tracing::warn!(path = %path.display(), "removing an unusable environment");
                    remove_env(envs_dir, &key);
                }
            }
        }
        for key in dirs.into_iter().chain(images) {
            if !index.entries.contains_key(&key) {
                tracing::warn!(key, "removing an environment without metadata");
                remove_env(envs_dir, &key);
            }
        }
        Ok(index)
    }

    /// Record a use of `key`; rewrite its metadata at most once a minute.
    pub(super) fn touch(&mut self, envs_dir: &Path, key: &str) {
        if let Some(e) = self.entries.get_mut(key) {
            e.meta.last_used_ms = now_ms().max(e.meta.last_used_ms);
            if e.written.elapsed() >= TOUCH_WRITE_INTERVAL {
                e.written = Instant::now();
                if let Err(err) = write_meta(envs_dir, &e.meta) {
                    tracing::warn!(key, error = %err, "could not record environment use");
                }
            }
        }
    }

    pub(super) fn bytes(&self) -> u64 {
        self.entries.values().map(|e| e.meta.size_bytes).sum()
    }
}

/// Freeze a finished environment: owned by root, not writable by group or
/// others, readable by everyone (run jails map other uids). Returns the
/// disk usage in bytes. Symlinks are never followed.
pub(super) fn freeze(dir: &Path) -> Result<u64, EnvError> {
    let mut total = 0u64;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        let m = std::fs::symlink_metadata(&path).map_err(EnvError::io("inspecting", &path))?;
        total = total.saturating_add(m.blocks().saturating_mul(512));
        std::os::unix::fs::lchown(&path, Some(0), Some(0))
            .map_err(EnvError::io("changing the owner of", &path))?;
        if m.file_type().is_symlink() {
            continue;
        }
        let mode = m.mode() & 0o7777;
        // Drop setuid/setgid and group/other write; give others what the
        // owner may read or execute.
        let owner_rx = (mode >> 6) & 0o5;
        let new = (mode & 0o755) | (owner_rx << 3) | owner_rx;
        if new != mode {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(new))
                .map_err(EnvError::io("changing the mode of", &path))?;
        }
        if m.is_dir() {
            let rd = std::fs::read_dir(&path).map_err(EnvError::io("reading", &path))?;
            for ent in rd {
                stack.push(ent.map_err(EnvError::io("reading", &path))?.path());
            }
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freeze_makes_readable_and_counts() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("a");
        std::fs::write(&f, vec![1u8; 10_000]).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o4700)).unwrap();
        std::os::unix::fs::symlink("/nonexistent", d.path().join("l")).unwrap();
        let n = freeze(d.path()).unwrap();
        assert!(n >= 10_000);
        let mode = std::fs::metadata(&f).unwrap().mode() & 0o7777;
        assert_eq!(mode, 0o755);
    }
}
