//! `[branches]`: a fork makes at most this many sessions, and a tenant's
//! checkpoint budget must hold at least one session's.

use super::findings::{Finding, Findings};
use crate::schema::Policy;
use crate::spans::KeyPath;
use crate::units::ByteSize;

/// Sessions one fork may make: each is a jail, a workspace and a copy.
pub const MAX_FORKS: u32 = 100;
/// Less would hold hardly any globals.
pub const MIN_CHECKPOINT_BYTES: ByteSize = ByteSize::mib(1);

pub(super) fn check(p: &Policy, f: &mut Findings) {
    let b = &p.branches;
    let at = |k: &str| KeyPath::new(&["branches", k]);
    if !(1..=MAX_FORKS).contains(&b.max_forks) {
        f.add(
            at("max_forks"),
            format!(
                "{} is out of range (at least 1, at most {MAX_FORKS})",
                b.max_forks
            ),
        );
    }
    if b.max_checkpoints_per_tenant < b.max_checkpoints {
        f.0.push(Finding {
            paths: vec![at("max_checkpoints"), at("max_checkpoints_per_tenant")],
            message: format!(
                "max_checkpoints ({}) is more than max_checkpoints_per_tenant ({}), \
                 the budget of all the tenant's sessions together",
                b.max_checkpoints, b.max_checkpoints_per_tenant
            ),
        });
    }
    if b.max_checkpoints > 0 && b.max_checkpoint_bytes < MIN_CHECKPOINT_BYTES {
        f.add(
            at("max_checkpoint_bytes"),
            format!(
                "{} is too small (at least {MIN_CHECKPOINT_BYTES}, or max_checkpoints = 0)",
                b.max_checkpoint_bytes
            ),
        );
    } else if b.max_checkpoint_bytes_per_tenant < b.max_checkpoint_bytes {
        f.0.push(Finding {
            paths: vec![
                at("max_checkpoint_bytes"),
                at("max_checkpoint_bytes_per_tenant"),
            ],
            message: format!(
                "max_checkpoint_bytes ({}) is more than max_checkpoint_bytes_per_tenant ({})",
                b.max_checkpoint_bytes, b.max_checkpoint_bytes_per_tenant
            ),
        });
    }
}
