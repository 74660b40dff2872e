//! Creating the front-end's system account, for real (`groupadd`,
//! `useradd`), against throw-away names that are removed afterwards, so the
//! host's `prims` user is left alone. Needs root.

use nix::unistd::{Group, User};
use prims_supervisor::accounts::{ensure_system_user, lookup};
use prims_supervisor::server::NOBODY_UID;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

fn require_root() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(euid, 0, "creating system users needs root (euid is {euid})");
}

/// A name no one else uses, and its user and group removed on drop.
struct ThrowAway(String);

impl ThrowAway {
    fn new() -> ThrowAway {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "prims-t{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        assert!(lookup(&name).unwrap().is_none(), "{name} already exists");
        assert!(Group::from_name(&name).unwrap().is_none());
        ThrowAway(name)
    }
}

impl Drop for ThrowAway {
    fn drop(&mut self) {
        for tool in ["userdel", "groupdel"] {
            let _ = Command::new(format!("/usr/sbin/{tool}"))
                .arg(&self.0)
                .output();
        }
    }
}

/// The highest uid `useradd --system` hands out here.
fn sys_uid_max() -> u32 {
    std::fs::read_to_string("/etc/login.defs")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("SYS_UID_MAX")?.trim().parse().ok())
        .unwrap_or(999)
}

#[test]
fn a_missing_user_is_created_as_a_system_account_of_its_own() {
    require_root();
    let name = ThrowAway::new();
    let account = ensure_system_user(&name.0, "PRIMS test account").unwrap();
    assert!(account.uid != 0 && account.uid != NOBODY_UID, "{account:?}");
    assert!(
        account.uid <= sys_uid_max(),
        "not a system uid: {account:?}"
    );
    let user = User::from_name(&name.0).unwrap().expect("the user exists");
    assert_eq!(
        (user.uid.as_raw(), user.gid.as_raw()),
        (account.uid, account.gid)
    );
    assert!(
        user.shell.ends_with("nologin") || user.shell == Path::new("/bin/false"),
        "a login shell: {}",
        user.shell.display()
    );
    assert_eq!(user.dir, Path::new("/nonexistent"));
    assert!(!user.dir.exists(), "a home directory was created");
    let group = Group::from_name(&name.0)
        .unwrap()
        .expect("its group exists");
    assert_eq!(group.gid.as_raw(), account.gid);
    // No other account answers to this uid.
    let by_uid = User::from_uid(user.uid).unwrap().expect("uid resolves");
    assert_eq!(by_uid.name, name.0);
    // A second start finds it and changes nothing.
    assert_eq!(
        ensure_system_user(&name.0, "PRIMS test account").unwrap(),
        account
    );
}

#[test]
fn an_existing_group_of_that_name_becomes_its_primary_group() {
    require_root();
    let name = ThrowAway::new();
    let out = Command::new("/usr/sbin/groupadd")
        .args(["--system", &name.0])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let gid = Group::from_name(&name.0).unwrap().unwrap().gid.as_raw();
    let account = ensure_system_user(&name.0, "PRIMS test account").unwrap();
    assert_eq!(account.gid, gid);
}

#[test]
fn concurrent_starts_agree_on_one_account() {
    require_root();
    let name = ThrowAway::new();
    let results: Vec<_> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..4)
            .map(|_| s.spawn(|| ensure_system_user(&name.0, "PRIMS test account")))
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let first = results[0].as_ref().unwrap();
    for r in &results {
        assert_eq!(r.as_ref().unwrap(), first);
    }
    // useradd and groupadd alone would each have added the name twice.
    for db in ["/etc/passwd", "/etc/group"] {
        let entries = std::fs::read_to_string(db).unwrap();
        let mine = entries
            .lines()
            .filter(|l| l.split(':').next() == Some(name.0.as_str()))
            .count();
        assert_eq!(mine, 1, "{db} has {mine} entries named {}", name.0);
    }
}
