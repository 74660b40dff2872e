//! What the proxy process gives up before it reads a byte from a jail,
//! once it runs as its own account ([`crate::identity`]): it cannot be
//! dumped; it gains no privilege by exec; and Landlock leaves it reading
//! files, never writing or executing one, nor binding a TCP port,
//! signalling or reaching abstract sockets outside itself.

use landlock::{
    path_beneath_rules, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};
use nix::errno::Errno;

/// The user it must never run as: other daemons do.
pub const NOBODY: u32 = 65534;
const WANT: ABI = ABI::V6;

#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    #[error("still root: confine only after becoming the proxy's account")]
    Root,
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
/// starts), since Landlock applies per thread.
pub fn confine() -> Result<Landlocked, ConfineError> {
    // SAFETY: plain syscalls on values.
    unsafe {
        if libc::geteuid() == 0 {
            return Err(ConfineError::Root);
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
