//! Which supervisor a job cgroup belongs to. Several supervisors, each with
//! its own state directory, may share one cgroup parent (the default one,
//! say), so a supervisor must know its own jobs from the others' to clean
//! up after a crash without killing theirs.
//!
//! The instance id is a hash of a random salt kept in the state directory
//! (made at its first start) and the state directory's canonical path. A
//! restart on the same directory, after a `kill -9` too, gets the same id
//! and finds its own leftovers; another directory never does, a copy of
//! this one included (its path differs), nor does a directory at the same
//! path on another filesystem (in another container: its salt differs).

use sha2::{Digest, Sha256};
use std::fs::OpenOptions;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The salt's file in the state directory.
const SALT_FILE: &str = "instance.salt";
/// Salt bytes, stored as twice as many lowercase hex digits.
const SALT_BYTES: usize = 16;
/// Hex digits of an instance id: 64 bits, fixed, so one id is never a
/// prefix of another's name.
pub(super) const ID_LEN: usize = 16;
/// Separates what the hash covers from any other use of SHA-256.
const DOMAIN: &[u8] = b"prims job cgroup instance v1\0";

/// This supervisor's instance id: `ID_LEN` (16) lowercase hex digits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceId(String);

#[derive(Debug, thiserror::Error)]
pub enum InstanceError {
    #[error("resolving the state directory {path}: {source}")]
    Canonicalize {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("opening {path}: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not {} lowercase hex digits; remove it and start again (the supervisor then no longer recognizes job cgroups it left before)", SALT_BYTES * 2)]
    Malformed { path: PathBuf },
    #[error("generating the instance salt: {0}")]
    Random(String),
    #[error("creating {path}: {source}")]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl InstanceId {
    /// The id of the supervisor whose state directory is `state_dir` (which
    /// must exist), making the salt on the directory's first start.
    pub fn of_state_dir(state_dir: &Path) -> Result<InstanceId, InstanceError> {
        let canonical =
            std::fs::canonicalize(state_dir).map_err(|source| InstanceError::Canonicalize {
                path: state_dir.to_path_buf(),
                source,
            })?;
        let salt = load_or_create_salt(&canonical.join(SALT_FILE))?;
        Ok(InstanceId::derive(&salt, &canonical))
    }

    fn derive(salt: &[u8], canonical: &Path) -> InstanceId {
        use std::os::unix::ffi::OsStrExt;
        let digest = Sha256::new()
            .chain_update(DOMAIN)
            .chain_update(salt)
            .chain_update(canonical.as_os_str().as_bytes())
            .finalize();
        let mut id = hex::encode(digest);
        id.truncate(ID_LEN);
        InstanceId(id)
    }

    /// `text` if it is an id (exactly `ID_LEN` (16) lowercase hex digits).
    pub fn parse(text: &str) -> Option<InstanceId> {
        is_lower_hex(text, ID_LEN).then(|| InstanceId(text.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for InstanceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

pub(super) fn is_lower_hex(text: &str, len: usize) -> bool {
    text.len() == len && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn load_or_create_salt(path: &Path) -> Result<Vec<u8>, InstanceError> {
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path);
    let mut file = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return create_salt(path),
        Err(source) => {
            return Err(InstanceError::Open {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    // One byte more than a salt, so a longer file is seen as malformed.
    let mut text = Vec::with_capacity(SALT_BYTES * 2 + 1);
    (&mut file)
        .take(SALT_BYTES as u64 * 2 + 1)
        .read_to_end(&mut text)
        .map_err(|source| InstanceError::Read {
            path: path.to_path_buf(),
            source,
        })?;
    let malformed = || InstanceError::Malformed {
        path: path.to_path_buf(),
    };
    let text = std::str::from_utf8(&text).map_err(|_| malformed())?;
    if !is_lower_hex(text, SALT_BYTES * 2) {
        return Err(malformed());
    }
    hex::decode(text).map_err(|_| malformed())
}

fn create_salt(path: &Path) -> Result<Vec<u8>, InstanceError> {
    let mut salt = [0u8; SALT_BYTES];
    getrandom::fill(&mut salt).map_err(|e| InstanceError::Random(e.to_string()))?;
    let create_err = |source| InstanceError::Create {
        path: path.to_path_buf(),
        source,
    };
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(create_err)?;
    f.write_all(hex::encode(salt).as_bytes())
        .and_then(|_| f.sync_all())
        .map_err(|source| InstanceError::Write {
            path: path.to_path_buf(),
            source,
        })?;
    Ok(salt.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_directory_gets_the_same_id_every_start() {
        let d = tempfile::tempdir().unwrap();
        let first = InstanceId::of_state_dir(d.path()).unwrap();
        let again = InstanceId::of_state_dir(d.path()).unwrap();
        assert_eq!(first, again);
        assert!(is_lower_hex(first.as_str(), ID_LEN), "{first}");
        let salt = std::fs::read_to_string(d.path().join(SALT_FILE)).unwrap();
        assert!(is_lower_hex(&salt, SALT_BYTES * 2), "{salt:?}");
    }

    #[test]
    fn a_path_through_a_symlink_is_the_same_directory() {
        let d = tempfile::tempdir().unwrap();
        let state = d.path().join("state");
        std::fs::create_dir(&state).unwrap();
        std::os::unix::fs::symlink(&state, d.path().join("link")).unwrap();
        assert_eq!(
            InstanceId::of_state_dir(&state).unwrap(),
            InstanceId::of_state_dir(&d.path().join("link")).unwrap()
        );
    }

    #[test]
    fn other_directories_and_copies_get_other_ids() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        let ida = InstanceId::of_state_dir(&a).unwrap();
        assert_ne!(ida, InstanceId::of_state_dir(&b).unwrap());
        // A copy of a's salt in another directory: the path still differs.
        let copy = d.path().join("copy");
        std::fs::create_dir(&copy).unwrap();
        std::fs::copy(a.join(SALT_FILE), copy.join(SALT_FILE)).unwrap();
        assert_ne!(ida, InstanceId::of_state_dir(&copy).unwrap());
        // The same path with another salt (another filesystem there).
        std::fs::remove_file(a.join(SALT_FILE)).unwrap();
        assert_ne!(ida, InstanceId::of_state_dir(&a).unwrap());
    }

    #[test]
    fn a_malformed_salt_is_refused_not_replaced() {
        let d = tempfile::tempdir().unwrap();
        for bad in ["", "xyz", &"A".repeat(32), &"0".repeat(31), &"0".repeat(33)] {
            std::fs::write(d.path().join(SALT_FILE), bad).unwrap();
            let e = InstanceId::of_state_dir(d.path()).unwrap_err();
            assert!(matches!(e, InstanceError::Malformed { .. }), "{bad:?}: {e}");
            assert_eq!(
                std::fs::read_to_string(d.path().join(SALT_FILE)).unwrap(),
                bad
            );
        }
    }

    #[test]
    fn a_missing_state_directory_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        let e = InstanceId::of_state_dir(&d.path().join("absent")).unwrap_err();
        assert!(matches!(e, InstanceError::Canonicalize { .. }), "{e}");
    }

    #[test]
    fn ids_parse_only_in_their_one_form() {
        assert!(InstanceId::parse("0123456789abcdef").is_some());
        for bad in [
            "0123456789abcde",
            "0123456789abcdef0",
            "0123456789ABCDEF",
            "g123456789abcdef",
        ] {
            assert!(InstanceId::parse(bad).is_none(), "{bad}");
        }
    }
}
