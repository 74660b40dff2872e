//! The front-end's account: it must exist and belong to the front-end
//! alone, since the supervisor trusts its uid.

use anyhow::{anyhow, bail, Context, Result};
use prims_supervisor::accounts::{self, Account};

pub fn user_name(uid: u32) -> String {
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(u)) => u.name,
        _ => uid.to_string(),
    }
}

/// `name`'s account, which must exist and be the front-end's alone.
pub fn frontend_account(name: &str) -> Result<Account> {
    let ids = accounts::lookup(name)?.ok_or_else(|| anyhow!("no user named {name}"))?;
    accounts::refuse_shared(name, ids.uid)?;
    Ok(ids)
}

/// setgroups, setgid, setuid to `name`, then check root cannot come back.
/// Must run before any other thread exists.
pub fn drop_to(name: &str) -> Result<()> {
    let ids = frontend_account(name)?;
    let groups = [ids.gid as libc::gid_t];
    // SAFETY: plain syscalls on values; the process is still single-threaded.
    unsafe {
        if libc::setgroups(1, groups.as_ptr()) != 0 {
            return Err(std::io::Error::last_os_error()).context("setgroups");
        }
        if libc::setgid(ids.gid) != 0 {
            return Err(std::io::Error::last_os_error()).context("setgid");
        }
        if libc::setuid(ids.uid) != 0 {
            return Err(std::io::Error::last_os_error()).context("setuid");
        }
        if libc::setuid(0) == 0 || libc::geteuid() == 0 {
            bail!("dropping privileges failed: root is still reachable");
        }
    }
    tracing::info!(
        user = name,
        uid = ids.uid,
        gid = ids.gid,
        "dropped privileges"
    );
    Ok(())
}
