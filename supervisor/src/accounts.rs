//! The system accounts of PRIMS's unprivileged processes, each theirs
//! alone. The front-end faces the network, and the supervisor trusts its
//! uid; the egress proxy relays jailed code's traffic. `nobody` is the
//! opposite of an account of one's own (other daemons run as it, and anyone
//! running as it could signal the process or use the supervisor's socket),
//! so it is never used: `prims serve` and the supervisor create dedicated
//! `prims` and `prims-egress` users instead, as the .deb does through
//! sysusers.d.

use nix::fcntl::{Flock, FlockArg};
use nix::unistd::{Group, User};
use std::fs::File;
use std::path::Path;
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

/// `nobody`, the kernel's overflow uid: unrelated daemons run as it, and
/// files and processes of other user namespaces show up as it. A socket
/// peer with this uid is never trusted, even when it is listed, and no
/// PRIMS process runs as it.
pub const NOBODY_UID: u32 = 65534;

/// The account `prims serve` and the packaged units run the front-end as.
pub const FRONTEND_USER: &str = "prims";

/// The account the egress proxy runs as (its effective uid).
pub const EGRESS_USER: &str = "prims-egress";

/// Exit status of `useradd`/`groupadd` when the name is already taken: a
/// concurrent creation of the same account won the race.
const NAME_IN_USE: i32 = 9;

/// Where the account databases live; see [`CreationLock`].
const LOCK_DIR: &str = "/etc";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Account {
    pub uid: u32,
    /// The primary group: it owns the supervisor's socket.
    pub gid: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    #[error("looking up {what} {name:?}: {source}")]
    Lookup {
        what: &'static str,
        name: String,
        source: nix::Error,
    },
    #[error("cannot run as {name} (uid {uid}): {why}")]
    Shared {
        name: String,
        uid: u32,
        why: &'static str,
    },
    #[error("cannot create the system user {name:?}: locking {LOCK_DIR}: {source}")]
    Lock {
        name: String,
        source: std::io::Error,
    },
    #[error("cannot create the system {what} {name:?}: running {tool}: {source}")]
    Spawn {
        what: &'static str,
        name: String,
        tool: String,
        source: std::io::Error,
    },
    #[error("cannot create the system {what} {name:?}: {tool} failed ({status}): {stderr}")]
    Tool {
        what: &'static str,
        name: String,
        tool: String,
        status: std::process::ExitStatus,
        stderr: String,
    },
    #[error("{tool} succeeded but there is still no {what} named {name:?}")]
    Missing {
        what: &'static str,
        name: String,
        tool: String,
    },
}

/// `name`'s uid and primary gid, if the user exists.
pub fn lookup(name: &str) -> Result<Option<Account>, AccountError> {
    let user = User::from_name(name).map_err(|source| AccountError::Lookup {
        what: "user",
        name: name.to_owned(),
        source,
    })?;
    Ok(user.map(|u| Account {
        uid: u.uid.as_raw(),
        gid: u.gid.as_raw(),
    }))
}

/// Refuse a uid that is not the front-end's alone: root (the front-end
/// faces the network) and `nobody` (shared by unrelated daemons).
pub fn refuse_shared(name: &str, uid: u32) -> Result<(), AccountError> {
    let why = match uid {
        0 => "it is root, and the front-end faces the network; name an unprivileged user",
        NOBODY_UID => {
            "nobody is shared by unrelated daemons, which could then use the \
             supervisor's socket and signal the front-end; give it a user of its own \
             (prims serve creates `prims`)"
        }
        _ => return Ok(()),
    };
    Err(AccountError::Shared {
        name: name.to_owned(),
        uid,
        why,
    })
}

/// The egress proxy's account, created if missing: never root, nobody or
/// a uid allowed on the supervisor's socket (`front_end`).
pub fn egress_account(name: &str, front_end: &[u32]) -> Result<Account, AccountError> {
    let account = ensure_system_user(name, "PRIMS egress proxy")?;
    let why = match account.uid {
        0 => "it is root; the proxy relays jailed code's traffic",
        NOBODY_UID => "nobody is shared by unrelated daemons, which could then signal the proxy",
        uid if front_end.contains(&uid) => {
            "it may use the supervisor's socket (it is the front-end's); the proxy must not"
        }
        _ => return Ok(account),
    };
    Err(AccountError::Shared {
        name: name.to_owned(),
        uid: account.uid,
        why,
    })
}

/// The system user `name` and its group of the same name, created if
/// missing: no home directory, a shell that refuses logins. An existing
/// group of that name becomes the user's primary group. Safe to call
/// concurrently for the same name.
pub fn ensure_system_user(name: &str, comment: &str) -> Result<Account, AccountError> {
    if let Some(account) = lookup(name)? {
        return Ok(account);
    }
    // useradd and groupadd check that a name is free before they lock the
    // account files, so two concurrent runs both add it: two `prims` users
    // with different uids. Creations are serialized here, and the name
    // checked again once this process holds the lock.
    let _lock = CreationLock::take(name)?;
    if let Some(account) = lookup(name)? {
        return Ok(account);
    }
    let group = Group::from_name(name).map_err(|source| AccountError::Lookup {
        what: "group",
        name: name.to_owned(),
        source,
    })?;
    if group.is_none() {
        run_tool("group", name, "groupadd", &["--system", name])?;
    }
    run_tool(
        "user",
        name,
        "useradd",
        &[
            "--system",
            "--gid",
            name,
            "--no-create-home",
            "--home-dir",
            "/nonexistent",
            "--shell",
            nologin(),
            "--comment",
            comment,
            name,
        ],
    )?;
    lookup(name)?.ok_or_else(|| AccountError::Missing {
        what: "user",
        name: name.to_owned(),
        tool: "useradd".to_owned(),
    })
}

/// Held while an account is created, by the threads of this process and by
/// other prims processes alike.
struct CreationLock {
    _threads: MutexGuard<'static, ()>,
    _processes: Flock<File>,
}

impl CreationLock {
    fn take(name: &str) -> Result<CreationLock, AccountError> {
        static THREADS: Mutex<()> = Mutex::new(());
        let threads = THREADS.lock().unwrap_or_else(|e| e.into_inner());
        let lock_err = |source: std::io::Error| AccountError::Lock {
            name: name.to_owned(),
            source,
        };
        // The directory, not /etc/passwd: useradd renames a new passwd over
        // the old one, so a lock on the file would not be seen by the next
        // process. No account tool locks the directory itself.
        let dir = File::open(LOCK_DIR).map_err(lock_err)?;
        let processes = Flock::lock(dir, FlockArg::LockExclusive)
            .map_err(|(_, errno)| lock_err(errno.into()))?;
        Ok(CreationLock {
            _threads: threads,
            _processes: processes,
        })
    }
}

/// The shell of an account no one logs into.
fn nologin() -> &'static str {
    ["/usr/sbin/nologin", "/sbin/nologin"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or("/bin/false")
}

/// `tool` from the usual sbin directories (sudo and su may leave them out
/// of PATH), else from PATH.
fn sbin(tool: &str) -> String {
    ["/usr/sbin", "/sbin"]
        .into_iter()
        .map(|dir| format!("{dir}/{tool}"))
        .find(|p| Path::new(p).exists())
        .unwrap_or_else(|| tool.to_owned())
}

fn run_tool(what: &'static str, name: &str, tool: &str, args: &[&str]) -> Result<(), AccountError> {
    let path = sbin(tool);
    let out = Command::new(&path)
        .args(args)
        .output()
        .map_err(|source| AccountError::Spawn {
            what,
            name: name.to_owned(),
            tool: path.clone(),
            source,
        })?;
    if out.status.success() {
        tracing::info!(what, name, "created a system {what}");
        return Ok(());
    }
    if out.status.code() == Some(NAME_IN_USE) {
        tracing::debug!(what, name, "the system {what} was created meanwhile");
        return Ok(());
    }
    Err(AccountError::Tool {
        what,
        name: name.to_owned(),
        tool: path,
        status: out.status,
        stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_and_nobody_are_refused_others_are_not() {
        assert!(matches!(
            refuse_shared("nobody", NOBODY_UID),
            Err(AccountError::Shared {
                uid: NOBODY_UID,
                ..
            })
        ));
        assert!(refuse_shared("root", 0).is_err());
        assert!(refuse_shared("prims", 998).is_ok());
        let e = refuse_shared("nobody", NOBODY_UID).unwrap_err().to_string();
        assert!(e.contains("shared by unrelated daemons"), "{e}");
    }
}
