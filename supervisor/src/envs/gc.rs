//! Least-recently-used collection of environments above the cache size cap.

use super::cache::{image_path, meta_path, remove_any, Index, TRASH_PREFIX};
use std::path::{Path, PathBuf};

/// The keys to delete, oldest use first, until the total fits `cap`. An
/// environment with a live lease, or in `keep`, is never chosen.
pub(super) fn plan(index: &Index, cap: u64, keep: &[&str]) -> Vec<String> {
    let mut total = index.bytes();
    if total <= cap {
        return Vec::new();
    }
    let mut candidates: Vec<(&String, u64, u64)> = index
        .entries
        .iter()
        .filter(|(k, e)| e.leases == 0 && !keep.contains(&k.as_str()))
        .map(|(k, e)| (k, e.meta.last_used_ms, e.meta.size_bytes))
        .collect();
    candidates.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(b.0)));
    let mut out = Vec::new();
    for (key, _, size) in candidates {
        if total <= cap {
            break;
        }
        total = total.saturating_sub(size);
        out.push(key.clone());
    }
    out
}

/// Take `keys` out of the index, unmount them and move their images aside,
/// so a new build of the same key can never collide with the deletion. Call
/// with the index locked; returns the paths to delete once it is released.
pub(super) fn detach(index: &mut Index, envs_dir: &Path, keys: &[String]) -> Vec<PathBuf> {
    let mut trash = Vec::new();
    for key in keys {
        if index.entries.remove(key).is_none() {
            continue;
        }
        // Unused (no lease), so no run holds it; a busy one detaches lazily.
        let dir = envs_dir.join(key);
        if let Err(e) = crate::volume::unmount(&dir) {
            tracing::warn!(key, error = %e, "could not unmount an environment");
            continue;
        }
        let _ = std::fs::remove_dir(&dir);
        let image = image_path(envs_dir, key);
        let aside = envs_dir.join(format!("{TRASH_PREFIX}{key}-{}", super::cache::rand_hex()));
        match std::fs::rename(&image, &aside) {
            Ok(()) => trash.push(aside),
            Err(e) => {
                tracing::warn!(path = %image.display(), error = %e, "could not move an environment aside");
                trash.push(image);
            }
        }
        trash.push(meta_path(envs_dir, key));
    }
    trash
}

pub(super) fn delete(paths: &[PathBuf]) {
    for p in paths {
        remove_any(p);
    }
}

#[cfg(test)]
mod tests {
    use super::super::cache::{Entry, Meta};
    use super::*;
    use std::time::Instant;

    fn entry(key: &str, used: u64, size: u64, leases: usize) -> (String, Entry) {
        let meta = Meta {
            key: key.into(),
            requirements: vec![],
            packages: vec![],
            interpreter: "/usr/bin/python3".into(),
            version: "3.11".into(),
            size_bytes: size,
            created_ms: 0,
            last_used_ms: used,
            build_ms: 0,
        };
        let written = Instant::now();
        (
            key.into(),
            Entry {
                meta,
                leases,
                written,
            },
        )
    }

    #[test]
    fn oldest_unleased_first_until_under_cap() {
        let mut idx = Index::default();
        idx.entries.extend([
            entry("a", 1, 100, 0),
            entry("b", 2, 100, 1),
            entry("c", 3, 100, 0),
            entry("base", 0, 100, 0),
            entry("d", 4, 100, 0),
        ]);
        assert_eq!(plan(&idx, 500, &["base"]), Vec::<String>::new());
        assert_eq!(plan(&idx, 400, &["base"]), vec!["a"]);
        assert_eq!(plan(&idx, 250, &["base"]), vec!["a", "c", "d"]);
        // Nothing else may go: the rest is leased or kept.
        assert_eq!(plan(&idx, 0, &["base"]), vec!["a", "c", "d"]);
    }
}
