//! `[branches]`: a fork makes at most this many sessions, and each wider
//! checkpoint budget (a tenant's, the node's) must hold at least one
//! narrower one (a session's, a tenant's).

use super::findings::{Finding, Findings};
use crate::schema::Policy;
use crate::spans::KeyPath;
use crate::units::ByteSize;

/// Sessions one fork may make: each is a jail, a workspace and a copy.
pub const MAX_FORKS: u32 = 100;
/// Less would hold hardly any globals.
pub const MIN_CHECKPOINT_BYTES: ByteSize = ByteSize::mib(1);
/// Less would hold hardly any workspace: a checkpoint takes a few inodes
/// of its own (its directory, `files/`, `meta.json`, the globals) before
/// the workspace's first file.
pub const MIN_CHECKPOINT_INODES: u64 = 64;

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
    at_most(
        f,
        ("max_checkpoints", u64::from(b.max_checkpoints)),
        (
            "max_checkpoints_per_tenant",
            u64::from(b.max_checkpoints_per_tenant),
        ),
    );
    let on = b.max_checkpoints > 0;
    if on && b.max_checkpoint_bytes < MIN_CHECKPOINT_BYTES {
        f.add(
            at("max_checkpoint_bytes"),
            format!(
                "{} is too small (at least {MIN_CHECKPOINT_BYTES}, or max_checkpoints = 0)",
                b.max_checkpoint_bytes
            ),
        );
    } else {
        let bytes = [
            ("max_checkpoint_bytes", b.max_checkpoint_bytes),
            (
                "max_checkpoint_bytes_per_tenant",
                b.max_checkpoint_bytes_per_tenant,
            ),
            ("max_checkpoint_bytes_total", b.max_checkpoint_bytes_total),
        ];
        for w in bytes.windows(2) {
            at_most_bytes(f, w[0], w[1]);
        }
    }
    if on && b.max_checkpoint_inodes < MIN_CHECKPOINT_INODES {
        f.add(
            at("max_checkpoint_inodes"),
            format!(
                "{} is too small (at least {MIN_CHECKPOINT_INODES}, or max_checkpoints = 0)",
                b.max_checkpoint_inodes
            ),
        );
    } else {
        let inodes = [
            ("max_checkpoint_inodes", b.max_checkpoint_inodes),
            (
                "max_checkpoint_inodes_per_tenant",
                b.max_checkpoint_inodes_per_tenant,
            ),
            ("max_checkpoint_inodes_total", b.max_checkpoint_inodes_total),
        ];
        for w in inodes.windows(2) {
            at_most(f, w[0], w[1]);
        }
    }
}

/// `narrow` must fit in `wide`, the budget of what it is a part of.
fn at_most(f: &mut Findings, narrow: (&str, u64), wide: (&str, u64)) {
    if narrow.1 > wide.1 {
        f.0.push(Finding {
            paths: paths(narrow.0, wide.0),
            message: format!(
                "{} ({}) is more than {} ({}), the budget it is a part of",
                narrow.0, narrow.1, wide.0, wide.1
            ),
        });
    }
}

fn at_most_bytes(f: &mut Findings, narrow: (&str, ByteSize), wide: (&str, ByteSize)) {
    if narrow.1 > wide.1 {
        f.0.push(Finding {
            paths: paths(narrow.0, wide.0),
            message: format!(
                "{} ({}) is more than {} ({}), the budget it is a part of",
                narrow.0, narrow.1, wide.0, wide.1
            ),
        });
    }
}

fn paths(narrow: &str, wide: &str) -> Vec<KeyPath> {
    vec![
        KeyPath::new(&["branches", narrow]),
        KeyPath::new(&["branches", wide]),
    ]
}
