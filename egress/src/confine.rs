//! What the proxy process gives up before it reads a byte from a jail. It
//! starts as root (the supervisor's child) and keeps nothing of it: it
//! becomes `nobody`, whom the supervisor's socket refuses (the front-end's
//! account would open that socket to it); it cannot be traced or dumped by
//! other `nobody` processes; it gains no privilege by exec; and Landlock
//! leaves it reading files, never writing or executing one, nor binding a
//! TCP port, signalling or reaching abstract sockets outside itself.

use landlock::{
    path_beneath_rules, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};
use nix::errno::Errno;

/// The user it runs as.
pub const NOBODY: u32 = 65534;
const WANT: ABI = ABI::V6;

#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    #[error("setgroups: {0}")]
    Setgroups(Errno),
    #[error("setresgid to {NOBODY}: {0}")]
    Setresgid(Errno),
    #[error("setresuid to {NOBODY}: {0}")]
    Setresuid(Errno),
    #[error("root came back after setresuid")]
    RootRegained,
    #[error("prctl(PR_SET_DUMPABLE): {0}")]
    Dumpable(Errno),
    #[error("prctl(PR_SET_NO_NEW_PRIVS): {0}")]
    NoNewPrivs(Errno),
    #[error("landlock: {0}")]
    Landlock(#[from] landlock::RulesetError),
}

/// How far Landlock got on this kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Landlocked {
    Fully,
    Partially,
    Not,
}

/// Gives everything up; single-threaded callers only (before the runtime
/// starts), since credentials change per thread.
pub fn confine() -> Result<Landlocked, ConfineError> {
    // SAFETY: plain syscalls on values.
    unsafe {
        if libc::geteuid() == 0 {
            if libc::setgroups(0, std::ptr::null()) != 0 {
                return Err(ConfineError::Setgroups(Errno::last()));
            }
            if libc::setresgid(NOBODY, NOBODY, NOBODY) != 0 {
                return Err(ConfineError::Setresgid(Errno::last()));
            }
            if libc::setresuid(NOBODY, NOBODY, NOBODY) != 0 {
                return Err(ConfineError::Setresuid(Errno::last()));
            }
            if libc::setuid(0) == 0 || libc::geteuid() == 0 {
                return Err(ConfineError::RootRegained);
            }
        }
        if libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 {
            return Err(ConfineError::Dumpable(Errno::last()));
        }
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(ConfineError::NoNewPrivs(Errno::last()));
        }
    }
    let read: BitFlags<AccessFs> = AccessFs::ReadFile | AccessFs::ReadDir;
    let status = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(WANT))?
        .handle_access(AccessNet::BindTcp)?
        .scope(Scope::from_all(WANT))?
        .create()?
        .add_rules(path_beneath_rules(["/"], read))?
        .restrict_self()?;
    Ok(match status.ruleset {
        RulesetStatus::FullyEnforced => Landlocked::Fully,
        RulesetStatus::PartiallyEnforced => Landlocked::Partially,
        RulesetStatus::NotEnforced => Landlocked::Not,
    })
}
