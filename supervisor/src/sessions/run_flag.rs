//! `<name>.run`: one byte, `1` while a run of the session is in flight and
//! `0` otherwise, so that a restart can tell a run the crash cut short.
//! Rewriting one byte in place costs a run two small writes to the page
//! cache; rewriting the metadata (a new file renamed over the old, which
//! ext4 flushes on the rename) cost it two file creations and two flushes.
//! A crash keeps whatever byte the page cache last held, which is all a
//! crash of the daemon (not of the host) needs.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

pub(super) fn path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.run"))
}

/// Marks a run of `name` in flight; the file is made on first use.
pub(super) fn raise(dir: &Path, name: &str) -> std::io::Result<()> {
    write(dir, name, b"1", true)
}

/// Marks the run over. A missing file means no run was marked.
pub(super) fn lower(dir: &Path, name: &str) -> std::io::Result<()> {
    match write(dir, name, b"0", false) {
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

fn write(dir: &Path, name: &str, byte: &[u8; 1], create: bool) -> std::io::Result<()> {
    let f = OpenOptions::new()
        .write(true)
        .create(create)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path(dir, name))?;
    f.write_all_at(byte, 0)
}

/// Whether the file says a run was in flight; anything but a leading `1`
/// (no file, an empty one) says not.
pub(super) fn raised(dir: &Path, name: &str) -> std::io::Result<bool> {
    let mut f = match File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path(dir, name))
    {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let mut first = [0u8; 1];
    let n = f.read(&mut first)?;
    Ok(n == 1 && first[0] == b'1')
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn tmp() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "prims-run-flag-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn raise_lower_and_read_back() {
        let d = tmp();
        assert!(!raised(&d, "a").unwrap(), "no file: no run");
        lower(&d, "a").unwrap();
        assert!(!path(&d, "a").exists(), "lowering makes no file");
        raise(&d, "a").unwrap();
        assert!(raised(&d, "a").unwrap());
        assert_eq!(fs::read(path(&d, "a")).unwrap(), b"1");
        lower(&d, "a").unwrap();
        assert!(!raised(&d, "a").unwrap());
        assert_eq!(fs::read(path(&d, "a")).unwrap(), b"0");
        fs::write(path(&d, "a"), b"").unwrap();
        assert!(!raised(&d, "a").unwrap(), "an empty file says no run");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_symlink_is_not_followed() {
        let d = tmp();
        fs::write(d.join("target"), b"0").unwrap();
        std::os::unix::fs::symlink(d.join("target"), path(&d, "a")).unwrap();
        let e = raise(&d, "a").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP));
        assert_eq!(fs::read(d.join("target")).unwrap(), b"0");
        fs::remove_dir_all(&d).unwrap();
    }
}
