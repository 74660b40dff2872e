//! uv's package cache (`state_dir/uv-cache`), shared by builds and written
//! only by the supervisor.
//!
//! An install jail never gets the cache itself: it gets an overlay whose
//! lower layer is the cache and whose upper layer lives on the build's own
//! volume. Whatever the jail writes lands in the upper layer. After a build
//! that ran no package code (`only_binary`), the supervisor copies what uv
//! added into the cache and records every file's hash in a manifest; after
//! any other build the upper layer is thrown away. Before a build uses the
//! cache, every file is checked against the manifest: a file whose size,
//! inode or times moved is hashed again, and an entry that fails, or that
//! the manifest does not know, is removed, so uv fetches it again (the
//! audit log notes each one). A cache left by an earlier version, which
//! install jails could write, is discarded whole.

use super::error::EnvError;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fs;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{RwLock, RwLockReadGuard};

const MANIFEST_VERSION: u32 = 1;

/// One file (or symlink) of the cache as the supervisor wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Record {
    size: u64,
    /// sha256 of the contents; of the target for a symlink.
    sha256: String,
    #[serde(default)]
    symlink: bool,
    /// Where the file was when recorded: any write or replacement moves
    /// one of these, and only then is the file hashed again.
    ino: u64,
    mtime_ns: i64,
    ctime_ns: i64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    version: u32,
    files: BTreeMap<String, Record>,
}

/// An entry that failed verification and was removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Evicted {
    /// Relative to the cache, e.g. `archive-v0/Ab12…`.
    pub entry: String,
    pub why: String,
}

pub(super) struct PkgCache {
    dir: PathBuf,
    manifest_path: PathBuf,
    /// Owns the cache's files: the overlay shows them to the jail as its
    /// own, so uv may create entries beside them (in the upper layer).
    owner: u32,
    /// Readers: builds whose overlay is mounted. Writers: verify, promote.
    manifest: RwLock<Manifest>,
}

/// Held while an overlay of the cache is mounted: the lower layer of a
/// mounted overlay must not change.
pub(super) struct CacheLease<'a> {
    _guard: RwLockReadGuard<'a, Manifest>,
    pub dir: &'a Path,
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> EnvError {
    EnvError::io(what, path)
}

impl PkgCache {
    /// Opens `state_dir/uv-cache`. Without a manifest it was written by an
    /// earlier version (or by hand) and is removed.
    pub(super) fn open(state_dir: &Path, owner: u32) -> Result<PkgCache, EnvError> {
        let dir = state_dir.join("uv-cache");
        let manifest_path = state_dir.join("uv-cache.manifest.json");
        let manifest = match fs::read(&manifest_path) {
            Ok(b) => serde_json::from_slice::<Manifest>(&b)
                .ok()
                .filter(|m| m.version == MANIFEST_VERSION),
            Err(e) if e.kind() == ErrorKind::NotFound => None,
            Err(e) => return Err(io("reading", &manifest_path)(e)),
        };
        let manifest = match manifest {
            Some(m) => m,
            None => {
                if dir.exists() {
                    tracing::warn!(dir = %dir.display(), "discarding a package cache without a manifest: builds of an earlier version could write it");
                    super::cache::remove_any(&dir);
                }
                Manifest {
                    version: MANIFEST_VERSION,
                    files: BTreeMap::new(),
                }
            }
        };
        make_dir(&dir, owner)?;
        let cache = PkgCache {
            dir,
            manifest_path,
            owner,
            manifest: RwLock::new(manifest),
        };
        cache.save(&cache.write())?;
        Ok(cache)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Manifest> {
        self.manifest.write().unwrap_or_else(|p| p.into_inner())
    }

    /// A lease on a cache whose every file matches the manifest: entries
    /// that fail are removed first (and returned), so uv fetches them again.
    /// Other builds may hold leases meanwhile; removing needs them gone.
    pub(super) fn checked_lease(&self) -> Result<(CacheLease<'_>, Vec<Evicted>), EnvError> {
        let mut evicted = Vec::new();
        for _ in 0..3 {
            let guard = self.manifest.read().unwrap_or_else(|p| p.into_inner());
            if self.failures(&guard.files)?.bad.is_empty() {
                return Ok((
                    CacheLease {
                        _guard: guard,
                        dir: &self.dir,
                    },
                    evicted,
                ));
            }
            drop(guard);
            evicted.extend(self.verify()?);
        }
        Err(EnvError::Build {
            message: "the package cache keeps changing under verification".into(),
        })
    }

    /// Checks the files on disk against `files`.
    fn failures(&self, files: &BTreeMap<String, Record>) -> Result<Failures, EnvError> {
        let mut found = BTreeMap::new();
        walk(&self.dir, &self.dir, &mut found)?;
        let mut bad: BTreeMap<String, String> = BTreeMap::new();
        let mut moved = Vec::new();
        for (rel, meta) in &found {
            let why = match files.get(rel) {
                None => Some("the manifest does not know it".to_string()),
                Some(rec) => match check(&self.dir.join(rel), meta, rec) {
                    Check::Same => None,
                    Check::Moved(rec) => {
                        moved.push((rel.clone(), rec));
                        None
                    }
                    Check::Differs(why) => Some(why),
                },
            };
            if let Some(why) = why {
                bad.entry(entry_root(rel))
                    .or_insert(format!("{rel}: {why}"));
            }
        }
        for rel in files.keys() {
            if !found.contains_key(rel) {
                bad.entry(entry_root(rel))
                    .or_insert(format!("{rel}: missing"));
            }
        }
        Ok(Failures { bad, moved })
    }

    /// Checks every file against the manifest and removes the entries that
    /// fail.
    pub(super) fn verify(&self) -> Result<Vec<Evicted>, EnvError> {
        let mut m = self.write();
        let Failures { bad, moved } = self.failures(&m.files)?;
        let mut changed = !moved.is_empty();
        m.files.extend(moved);
        let mut evicted = Vec::new();
        for (entry, why) in bad {
            super::cache::remove_any(&self.dir.join(&entry));
            let prefix = format!("{entry}/");
            m.files
                .retain(|k, _| k != &entry && !k.starts_with(&prefix));
            tracing::warn!(
                entry,
                why,
                "package cache entry failed verification; it will be fetched again"
            );
            evicted.push(Evicted { entry, why });
            changed = true;
        }
        if changed {
            self.save(&m)?;
        }
        Ok(evicted)
    }

    /// Copies what a build added (the overlay's upper layer, unmounted) into
    /// the cache, hashing each file, then trims the cache to `cap` bytes.
    pub(super) fn promote(&self, upper: &Path, cap: u64) -> Result<(), EnvError> {
        let mut m = self.write();
        merge(upper, &self.dir, "", self.owner, &mut m.files)?;
        trim(&self.dir, cap, &mut m.files);
        self.save(&m)
    }

    fn save(&self, m: &Manifest) -> Result<(), EnvError> {
        let tmp = self.manifest_path.with_extension("json.tmp");
        let data = serde_json::to_vec(m).map_err(|e| EnvError::Build {
            message: format!("encoding the package cache manifest: {e}"),
        })?;
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)
            .map_err(io("writing", &tmp))?;
        f.write_all(&data)
            .and_then(|_| f.sync_all())
            .map_err(io("writing", &tmp))?;
        fs::rename(&tmp, &self.manifest_path).map_err(io("renaming", &self.manifest_path))
    }
}

fn make_dir(dir: &Path, owner: u32) -> Result<(), EnvError> {
    match fs::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io("creating", dir)(e)),
    }
    let m = fs::symlink_metadata(dir).map_err(io("inspecting", dir))?;
    if !m.is_dir() {
        return Err(EnvError::Build {
            message: format!("{} is not a directory", dir.display()),
        });
    }
    std::os::unix::fs::lchown(dir, Some(owner), Some(owner)).map_err(io("chowning", dir))?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o755)).map_err(io("chmod of", dir))
}

/// What verification found.
struct Failures {
    /// Entries whose files fail (entry → why).
    bad: BTreeMap<String, String>,
    /// Records of files that moved with the same contents (a restore), to
    /// refresh.
    moved: Vec<(String, Record)>,
}

/// What a file of the cache is removed with: a whole unpacked archive
/// (`archive-v0/<id>`), since uv would trust a half one; else the file.
fn entry_root(rel: &str) -> String {
    let mut parts = rel.splitn(3, '/');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(bucket), Some(id), Some(_)) if bucket.starts_with("archive-") => {
            format!("{bucket}/{id}")
        }
        _ => rel.to_string(),
    }
}

/// Every file and symlink under `dir`, by path relative to `root`. Anything
/// else (a FIFO, a device) is reported with no metadata and fails checks.
fn walk(
    root: &Path,
    dir: &Path,
    out: &mut BTreeMap<String, Option<fs::Metadata>>,
) -> Result<(), EnvError> {
    for ent in fs::read_dir(dir).map_err(io("reading", dir))? {
        let ent = ent.map_err(io("reading", dir))?;
        let path = ent.path();
        let meta = fs::symlink_metadata(&path).map_err(io("inspecting", &path))?;
        let rel = path
            .strip_prefix(root)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let t = meta.file_type();
        if t.is_dir() {
            walk(root, &path, out)?;
        } else if t.is_file() || t.is_symlink() {
            out.insert(rel, Some(meta));
        } else {
            out.insert(rel, None);
        }
    }
    Ok(())
}

enum Check {
    Same,
    /// Moved (a restore, say) but the same contents: the record to keep.
    Moved(Record),
    Differs(String),
}

fn check(path: &Path, meta: &Option<fs::Metadata>, rec: &Record) -> Check {
    let Some(meta) = meta else {
        return Check::Differs("not a file".into());
    };
    if meta.file_type().is_symlink() != rec.symlink {
        return Check::Differs("its type changed".into());
    }
    let token = (meta.ino(), meta.mtime_nsec_total(), meta.ctime_nsec_total());
    if meta.len() == rec.size && token == (rec.ino, rec.mtime_ns, rec.ctime_ns) {
        return Check::Same;
    }
    match hash(path, rec.symlink) {
        Ok((size, sha)) if size == rec.size && sha == rec.sha256 => {
            let mut rec = rec.clone();
            (rec.ino, rec.mtime_ns, rec.ctime_ns) = token;
            Check::Moved(rec)
        }
        Ok(_) => Check::Differs("its contents changed".into()),
        Err(e) => Check::Differs(format!("unreadable: {e}")),
    }
}

trait NsTimes {
    fn mtime_nsec_total(&self) -> i64;
    fn ctime_nsec_total(&self) -> i64;
}

impl NsTimes for fs::Metadata {
    fn mtime_nsec_total(&self) -> i64 {
        self.mtime().saturating_mul(1_000_000_000) + self.mtime_nsec()
    }
    fn ctime_nsec_total(&self) -> i64 {
        self.ctime().saturating_mul(1_000_000_000) + self.ctime_nsec()
    }
}

/// (size, sha256) of a file's contents, or of a symlink's target.
fn hash(path: &Path, symlink: bool) -> std::io::Result<(u64, String)> {
    if symlink {
        let t = fs::read_link(path)?;
        let b = t.as_os_str().as_encoded_bytes();
        return Ok((b.len() as u64, hex::encode(Sha256::digest(b))));
    }
    let mut f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut size = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        size += n as u64;
        h.update(&buf[..n]);
    }
    Ok((size, hex::encode(h.finalize())))
}

fn record(path: &Path) -> std::io::Result<Record> {
    let meta = fs::symlink_metadata(path)?;
    let symlink = meta.file_type().is_symlink();
    let (size, sha256) = hash(path, symlink)?;
    Ok(Record {
        size,
        sha256,
        symlink,
        ino: meta.ino(),
        mtime_ns: meta.mtime_nsec_total(),
        ctime_ns: meta.ctime_nsec_total(),
    })
}

/// A whiteout in an overlay's upper layer: a character device 0:0.
fn is_whiteout(m: &fs::Metadata) -> bool {
    use std::os::unix::fs::FileTypeExt;
    m.file_type().is_char_device() && m.rdev() == 0
}

fn is_opaque(dir: &Path) -> bool {
    xattr_is(dir, c"trusted.overlay.opaque", b"y")
}

fn xattr_is(path: &Path, name: &std::ffi::CStr, want: &[u8]) -> bool {
    let Ok(p) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    let mut buf = [0u8; 8];
    // SAFETY: both strings are NUL-terminated; buf outlives the call.
    let n = unsafe {
        libc::lgetxattr(
            p.as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    n >= 0 && &buf[..n as usize] == want
}

fn forget(files: &mut BTreeMap<String, Record>, rel: &str) {
    let prefix = format!("{rel}/");
    files.retain(|k, _| k != rel && !k.starts_with(&prefix));
}

/// Applies the upper layer `src` onto the cache `dst` (both at `rel`):
/// whiteouts delete, opaque directories replace, files and symlinks are
/// copied (never hardlinked: the upper layer dies with its volume).
fn merge(
    src: &Path,
    dst: &Path,
    rel: &str,
    owner: u32,
    files: &mut BTreeMap<String, Record>,
) -> Result<(), EnvError> {
    for ent in fs::read_dir(src).map_err(io("reading", src))? {
        let ent = ent.map_err(io("reading", src))?;
        let name = ent.file_name();
        let from = ent.path();
        let to = dst.join(&name);
        let r = if rel.is_empty() {
            name.to_string_lossy().into_owned()
        } else {
            format!("{rel}/{}", name.to_string_lossy())
        };
        let m = fs::symlink_metadata(&from).map_err(io("inspecting", &from))?;
        let t = m.file_type();
        let existing = fs::symlink_metadata(&to).ok();
        if is_whiteout(&m) {
            super::cache::remove_any(&to);
            forget(files, &r);
        } else if t.is_dir() {
            let replace = is_opaque(&from) || existing.as_ref().is_some_and(|e| !e.is_dir());
            if replace {
                super::cache::remove_any(&to);
                forget(files, &r);
            }
            make_dir(&to, owner)?;
            merge(&from, &to, &r, owner, files)?;
        } else if t.is_file() || t.is_symlink() {
            if existing.as_ref().is_some_and(|e| e.is_dir()) {
                super::cache::remove_any(&to);
                forget(files, &r);
            }
            copy_in(&from, &to, &m, owner)?;
            let rec = record(&to).map_err(io("hashing", &to))?;
            files.insert(r, rec);
        }
    }
    Ok(())
}

/// Copies one file or symlink to a temporary name beside `to`, then renames
/// it over `to`: a reader never sees half a file.
fn copy_in(from: &Path, to: &Path, m: &fs::Metadata, owner: u32) -> Result<(), EnvError> {
    let parent = to.parent().unwrap_or(Path::new("/"));
    let tmp = parent.join(format!(".prims-tmp-{}", super::cache::rand_hex()));
    if m.file_type().is_symlink() {
        let target = fs::read_link(from).map_err(io("reading", from))?;
        std::os::unix::fs::symlink(&target, &tmp).map_err(io("creating", &tmp))?;
    } else {
        let mut src = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(from)
            .map_err(io("reading", from))?;
        let mode = (m.mode() & 0o755) | 0o444;
        let mut dst = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)
            .map_err(io("creating", &tmp))?;
        std::io::copy(&mut src, &mut dst).map_err(io("copying to", &tmp))?;
        dst.set_permissions(fs::Permissions::from_mode(mode))
            .map_err(io("chmod of", &tmp))?;
    }
    std::os::unix::fs::lchown(&tmp, Some(owner), Some(owner)).map_err(io("chowning", &tmp))?;
    fs::rename(&tmp, to).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        io("renaming into", to)(e)
    })
}

/// Removes unpacked archives, oldest first, until the cache fits `cap`;
/// if the rest alone is larger, empties it.
fn trim(dir: &Path, cap: u64, files: &mut BTreeMap<String, Record>) {
    let total: u64 = files.values().map(|r| r.size).sum();
    if total <= cap {
        return;
    }
    let mut entries: BTreeMap<String, (u64, i64)> = BTreeMap::new();
    for (rel, r) in files.iter() {
        let root = entry_root(rel);
        if root.starts_with("archive-") && root != *rel {
            let e = entries.entry(root).or_insert((0, i64::MIN));
            e.0 += r.size;
            e.1 = e.1.max(r.mtime_ns);
        }
    }
    let mut by_age: Vec<(String, u64, i64)> =
        entries.into_iter().map(|(k, (s, t))| (k, s, t)).collect();
    by_age.sort_by_key(|e| e.2);
    let mut total = total;
    for (root, size, _) in by_age {
        if total <= cap {
            break;
        }
        super::cache::remove_any(&dir.join(&root));
        forget(files, &root);
        total = total.saturating_sub(size);
    }
    if total > cap {
        tracing::info!(
            cap,
            total,
            "the package cache is over its cap without archives; emptying it"
        );
        for rel in files
            .keys()
            .map(|r| r.split('/').next().unwrap_or("").to_string())
            .collect::<std::collections::BTreeSet<_>>()
        {
            super::cache::remove_any(&dir.join(rel));
        }
        files.clear();
    } else {
        tracing::info!(cap, total, "trimmed the package cache");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archives_are_removed_whole() {
        assert_eq!(entry_root("archive-v0/abc/six.py"), "archive-v0/abc");
        assert_eq!(entry_root("archive-v0/abc/pkg/x/y.py"), "archive-v0/abc");
        assert_eq!(
            entry_root("wheels-v8/pypi/six/1.17.0.http"),
            "wheels-v8/pypi/six/1.17.0.http"
        );
        assert_eq!(entry_root("CACHEDIR.TAG"), "CACHEDIR.TAG");
    }
}
