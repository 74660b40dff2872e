//! Landlock: the ruleset for the access set of `plan::landlock_access`
//! (read and execute on the read-only binds, read and write on the
//! workspace, `/tmp`, `/dev/shm` and the writable device nodes, listing
//! the root's mount points, no TCP without a network), with abstract
//! sockets and signals scoped. Applied after all mount work.

use crate::error::JailError;
use crate::plan::landlock_access::{LandlockAccess, TcpAccess};
use landlock::{
    path_beneath_rules, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};
use prims_protocol::jail::Enforcement;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

/// The newest ABI this build asks for; older kernels get what they support.
const WANT: ABI = ABI::V6;

/// Restrict the calling process to `access`. Paths absent from the new root
/// are left out. Without Landlock, or when the kernel enforces none of it,
/// this fails only when `required`.
pub fn apply(access: &LandlockAccess, required: bool) -> Result<(Enforcement, u32), JailError> {
    let abi = prims_syscalls::landlock_abi();
    if abi == 0 {
        if required {
            return Err(JailError::LandlockUnsupported);
        }
        return Ok((Enforcement::None, 0));
    }
    let status = created(access)?.restrict_self().map_err(err)?;
    let enforcement = match status.ruleset {
        RulesetStatus::FullyEnforced => Enforcement::Full,
        RulesetStatus::PartiallyEnforced => Enforcement::Partial,
        RulesetStatus::NotEnforced if required => return Err(JailError::LandlockUnsupported),
        RulesetStatus::NotEnforced => Enforcement::None,
    };
    Ok((enforcement, abi))
}

/// The same ruleset, for another process to restrict itself with
/// (`landlock_restrict_self` on this fd); none without Landlock.
pub fn ruleset_fd(access: &LandlockAccess, required: bool) -> Result<Option<OwnedFd>, JailError> {
    if prims_syscalls::landlock_abi() == 0 {
        if required {
            return Err(JailError::LandlockUnsupported);
        }
        return Ok(None);
    }
    Ok(created(access)?.into())
}

fn err(e: landlock::RulesetError) -> JailError {
    JailError::Landlock(format!("landlock: {e}"))
}

fn created(access: &LandlockAccess) -> Result<RulesetCreated, JailError> {
    let existing = |v: &[PathBuf]| -> Vec<PathBuf> {
        v.iter()
            .filter(|p| Path::new(p).exists())
            .cloned()
            .collect()
    };
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(WANT))
        .map_err(err)?;
    if access.tcp != TcpAccess::Unrestricted {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(WANT))
            .map_err(err)?;
    }
    ruleset
        .scope(Scope::from_all(WANT))
        .map_err(err)?
        .create()
        .map_err(err)?
        .add_rules(path_beneath_rules(
            existing(&access.read_exec),
            AccessFs::from_read(WANT),
        ))
        .map_err(err)?
        .add_rules(path_beneath_rules(
            existing(&access.read_write),
            AccessFs::from_all(WANT),
        ))
        .map_err(err)?
        .add_rules(path_beneath_rules(
            existing(&access.list),
            AccessFs::ReadDir,
        ))
        .map_err(err)
}
