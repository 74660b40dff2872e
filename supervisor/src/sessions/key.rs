//! Session ids are capabilities: whoever knows one may use the session. So
//! the supervisor never writes an id anywhere a local user could read it.
//! Files, mount points, loop devices, cgroups, logs and the audit log carry
//! the session's *name* instead: a keyed hash of its id under a secret that
//! only root can read (`state_dir/session.key`). The name leads nowhere
//! without the id, and the id cannot be recovered from it.

use super::error::SessionError;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::fs::OpenOptions;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

const KEY_BYTES: usize = 32;
pub const KEY_FILE: &str = "session.key";

/// The secret that turns session ids into names.
#[derive(Clone)]
pub struct SessionKey([u8; KEY_BYTES]);

impl std::fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionKey(..)")
    }
}

impl SessionKey {
    /// Reads `state_dir/session.key`, creating it (0600) on first start.
    /// A key of the wrong size, or one others may read, is refused: every
    /// name derived from it would be guessable or wrong.
    pub fn load_or_create(state_dir: &Path) -> Result<SessionKey, SessionError> {
        let path = state_dir.join(KEY_FILE);
        let open = || {
            OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&path)
        };
        let mut file = match open() {
            Ok(f) => f,
            Err(e) if e.kind() == ErrorKind::NotFound => return Self::create(&path),
            Err(e) => return Err(SessionError::io("opening the session key")(e)),
        };
        let meta = file
            .metadata()
            .map_err(SessionError::io("inspecting the session key"))?;
        if !meta.is_file() || meta.permissions().mode() & 0o077 != 0 {
            return Err(SessionError::Workspace(format!(
                "{} must be a regular file only root can read (mode 0600)",
                path.display()
            )));
        }
        let mut key = [0u8; KEY_BYTES];
        let mut extra = [0u8; 1];
        file.read_exact(&mut key)
            .map_err(SessionError::io("reading the session key"))?;
        if file.read(&mut extra).unwrap_or(0) != 0 {
            return Err(SessionError::Workspace(format!(
                "{} is not a session key ({KEY_BYTES} bytes)",
                path.display()
            )));
        }
        Ok(SessionKey(key))
    }

    fn create(path: &Path) -> Result<SessionKey, SessionError> {
        let mut key = [0u8; KEY_BYTES];
        getrandom::fill(&mut key).map_err(|e| SessionError::Io {
            what: "generating the session key".into(),
            source: std::io::Error::other(e.to_string()),
        })?;
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
            .map_err(SessionError::io("creating the session key"))?;
        f.set_permissions(std::fs::Permissions::from_mode(0o600))
            .and_then(|_| f.write_all(&key))
            .and_then(|_| f.sync_all())
            .map_err(SessionError::io("writing the session key"))?;
        Ok(SessionKey(key))
    }

    /// The name of session `id`: HMAC-SHA256 under the key, cut to 128
    /// bits and written like an id (32 lowercase hex characters).
    pub fn name_of(&self, id: &str) -> String {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"));
        mac.update(id.as_bytes());
        hex::encode(&mac.finalize().into_bytes()[..16])
    }

    /// The placeholder of secret `secret` in the sessions of `lineage` (a
    /// session and its branches share it, so a value a branch inherited
    /// still works there): keyed, so it means nothing to another lineage
    /// or another server.
    pub fn placeholder(&self, lineage: &str, secret: &str) -> String {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"));
        mac.update(b"secret-placeholder\0");
        mac.update(lineage.as_bytes());
        mac.update(b"\0");
        mac.update(secret.as_bytes());
        format!(
            "prims-secret-{}",
            hex::encode(&mac.finalize().into_bytes()[..16])
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_stable_keyed_and_id_shaped() {
        let dir = tempfile::tempdir().unwrap();
        let k = SessionKey::load_or_create(dir.path()).unwrap();
        let mode = std::fs::metadata(dir.path().join(KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let id = "0123456789abcdef0123456789abcdef";
        let name = k.name_of(id);
        assert!(super::super::meta::is_valid_id(&name), "{name}");
        assert_ne!(name, id);
        assert_eq!(
            SessionKey::load_or_create(dir.path()).unwrap().name_of(id),
            name
        );
        let other = tempfile::tempdir().unwrap();
        let k2 = SessionKey::load_or_create(other.path()).unwrap();
        assert_ne!(k2.name_of(id), name, "another key gives another name");
    }

    #[test]
    fn a_readable_or_short_key_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        SessionKey::load_or_create(dir.path()).unwrap();
        let path = dir.path().join(KEY_FILE);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = SessionKey::load_or_create(dir.path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("mode 0600"), "{e}");
        std::fs::write(&path, b"short").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(SessionKey::load_or_create(dir.path()).is_err());
    }
}
