//! Virtual environments made by hand: a `pyvenv.cfg`, a `bin/python` symlink
//! and an empty `site-packages`. This costs about a millisecond, where
//! `python -m venv` costs seconds.

use std::io;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum VenvError {
    #[error("interpreter {0} is not an absolute path to a file")]
    BadInterpreter(PathBuf),
    #[error("python version {0:?} is not of the form X.Y")]
    BadVersion(String),
    #[error("creating venv at {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> VenvError + '_ {
    move |source| VenvError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Validate `X.Y` so it can be used in a path.
fn check_version(version: &str) -> Result<(), VenvError> {
    let ok = version.split_once('.').is_some_and(|(a, b)| {
        !a.is_empty()
            && !b.is_empty()
            && a.bytes().all(|c| c.is_ascii_digit())
            && b.bytes().all(|c| c.is_ascii_digit())
    });
    if ok {
        Ok(())
    } else {
        Err(VenvError::BadVersion(version.to_string()))
    }
}

/// Write an empty venv for `interpreter` (Python `version`, `X.Y`) into `dir`,
/// which must not exist yet.
pub(crate) fn create(interpreter: &Path, version: &str, dir: &Path) -> Result<(), VenvError> {
    check_version(version)?;
    let home = interpreter
        .parent()
        .filter(|_| interpreter.is_absolute())
        .ok_or_else(|| VenvError::BadInterpreter(interpreter.to_path_buf()))?;
    let site = dir.join(format!("lib/python{version}/site-packages"));
    std::fs::create_dir_all(&site).map_err(io_err(&site))?;
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).map_err(io_err(&bin))?;
    for name in ["python", "python3", &format!("python{version}")] {
        let link = bin.join(name);
        std::os::unix::fs::symlink(interpreter, &link).map_err(io_err(&link))?;
    }
    let cfg = dir.join("pyvenv.cfg");
    let text = format!(
        "home = {}\ninclude-system-site-packages = false\nversion = {version}\nexecutable = {}\n",
        home.display(),
        interpreter.display()
    );
    std::fs::write(&cfg, text).map_err(io_err(&cfg))
}

/// The empty venv for `interpreter` under `root`, created once and then
/// reused. Creation goes through a temporary name and an atomic rename, so a
/// reader never sees half a venv.
pub(crate) fn empty(root: &Path, interpreter: &Path, version: &str) -> Result<PathBuf, VenvError> {
    check_version(version)?;
    let key = format!("{:016x}", fnv1a(interpreter.as_os_str().as_encoded_bytes()));
    let dir = root.join(format!("empty-{version}-{key}"));
    if dir.join("pyvenv.cfg").is_file() {
        return Ok(dir);
    }
    std::fs::create_dir_all(root).map_err(io_err(root))?;
    let tmp = tempfile::Builder::new()
        .prefix(".building-")
        .tempdir_in(root)
        .map_err(io_err(root))?;
    let staged = tmp.path().join("venv");
    create(interpreter, version, &staged)?;
    match std::fs::rename(&staged, &dir) {
        Ok(()) => Ok(dir),
        // Another process won the race; its venv is identical.
        Err(_) if dir.join("pyvenv.cfg").is_file() => Ok(dir),
        Err(e) => Err(io_err(&dir)(e)),
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_a_venv_python_accepts() {
        let d = tempfile::tempdir().unwrap();
        let v = empty(d.path(), Path::new("/usr/bin/python3"), "3.11").unwrap();
        let out = std::process::Command::new(v.join("bin/python"))
            .args(["-I", "-c", "import sys; print(sys.prefix, sys.base_prefix)"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(text.trim(), format!("{} /usr", v.display()));
        // A second call reuses the same directory.
        assert_eq!(
            empty(d.path(), Path::new("/usr/bin/python3"), "3.11").unwrap(),
            v
        );
    }

    #[test]
    fn refuses_bad_versions() {
        let d = tempfile::tempdir().unwrap();
        for bad in ["3", "../3.11", "3.x", ""] {
            assert!(matches!(
                empty(d.path(), Path::new("/usr/bin/python3"), bad),
                Err(VenvError::BadVersion(_))
            ));
        }
    }
}
