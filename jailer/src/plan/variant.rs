//! How a job's jail departs from a cold jail, as data. The recipe (`lib`,
//! `init`, `rootfs`, `idmap`, `seccomp_rules`) builds every jail the same
//! way and reads these fields where a fork template's differs; this is the
//! one place that says what a template is. (A template's *children* are
//! not a variant: `adopt` builds a cold jail's confinement around them.)
//!
//! A template is a jailed python that imports the prewarm set once and
//! then only forks; each child (K) builds its own namespaces from it and is
//! adopted by a jailer (the architecture guide's "Fork templates"). So that
//! its children can do that, a template's jail differs from a cold one in
//! exactly these ways, each with its reason:
//!
//! - **no pid namespace of its own** ([`Variant::pid_namespace`]): each
//!   child's init makes one beside it, so the template's end ends none of
//!   its children;
//! - **the children's ids mapped** ([`Variant::children_ids`]): a child's
//!   user namespace is made inside the template's, and the kernel lets it
//!   map only ids its parent namespace maps: its session's host uid among
//!   them;
//! - **the host's procfs, whole, behind a locked door**
//!   ([`Variant::proc`]): a child's init may mount a procfs of its own only
//!   where one is fully visible already;
//! - **`unshare` and `setns` allowed, the policy's own denials left to
//!   each child** ([`Variant::seccomp`]): K unshares its namespaces and
//!   joins its init's pid namespace, then stacks the job's full filter
//!   (which denies both again) on this one; a denied `prlimit64` would
//!   keep it from setting its rlimits;
//! - **no per-user rlimits, its own or its maker's**
//!   ([`Variant::per_user_rlimits`]): the kernel counts every child's
//!   processes, pending signals, message-queue bytes and locked shared
//!   memory against the template's uid as well, in the template's user
//!   namespace up to the limits the child's parent (a copy of the
//!   template) had when the child's namespace was made, and on the host up
//!   to the jailer's when the template's was made: one budget for all its
//!   children, unless both are unlimited. So the jailer lifts its own
//!   before it clones the template, the template keeps them unlimited, and
//!   each child lifts its soft limits before it unshares its user
//!   namespace, then takes a cold jail's own; the template's cgroup still
//!   holds it, and each child gets its own;
//! - **no Landlock domain of its own** ([`Variant::landlock`]): a domain
//!   would lie under each child's, and the kernel skips a rule on a
//!   directory that a child's own mount later covers (its `/workspace`,
//!   `/tmp`, `/proc`), so it would deny a child its own workspace; its
//!   mount namespace (a read-only root), no capability and seccomp confine
//!   it instead;
//! - **python dies with the init** ([`Variant::python_dies_with_init`]):
//!   without a shared pid namespace, the init's end would not take python
//!   with it;
//! - **no `/dev/shm` of its own** ([`Variant::shm`]): each child's init
//!   mounts one; a template's would lie under every child's, one tmpfs
//!   shared by all of them, if covered.

use prims_protocol::jail::{ForkRole, JobSpec, TEMPLATE_CHILD_UIDS};

/// The host ids a template's user namespace maps for its children, at
/// jail ids [`TEMPLATE_CHILD_UIDS`] and up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChildIds {
    pub base: u32,
    pub count: u32,
}

/// The jail's `/proc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcView {
    /// A fresh procfs of the jail's pid namespace, with the jail's
    /// ceilings and its host-revealing parts masked.
    Masked,
    /// The host's procfs bound whole at `TEMPLATE_PROC`, inside a
    /// directory of mode 0 owned by `keeper`, an id no session has; `/proc`
    /// itself stays empty.
    ForChildren { keeper: u32 },
}

/// Which calls the jail's seccomp filter leaves to the next layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeccompScope {
    /// The whole filter: the calls the jail always refuses and the
    /// policy's own.
    Whole,
    /// `unshare` and `setns` allowed and the policy's own denials left out:
    /// each child stacks its job's whole filter on this one.
    UnderChildren,
}

/// How the jail departs from a cold one; [`Variant::COLD`] departs in
/// nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variant {
    /// The jail has a pid namespace of its own, whose pid 1 is the init.
    pub pid_namespace: bool,
    /// Ids beyond the jail's own that its user namespace maps.
    pub children_ids: Option<ChildIds>,
    pub proc: ProcView,
    pub seccomp: SeccompScope,
    /// The jail has the per-user rlimits of a job (processes, pending
    /// signals, message-queue bytes, locked memory); without them, they are
    /// unlimited, from the jailer on.
    pub per_user_rlimits: bool,
    /// The init applies a Landlock domain to itself and python.
    pub landlock: bool,
    /// python sets a parent-death signal, since the init's end does not
    /// end its pid namespace.
    pub python_dies_with_init: bool,
    /// The jail mounts a `/dev/shm` of its own (else the directory stays
    /// empty, on the read-only `/dev`).
    pub shm: bool,
}

impl Variant {
    pub const COLD: Variant = Variant {
        pid_namespace: true,
        children_ids: None,
        proc: ProcView::Masked,
        seccomp: SeccompScope::Whole,
        per_user_rlimits: true,
        landlock: true,
        python_dies_with_init: false,
        shm: true,
    };

    /// The variant `spec` asks for.
    pub fn of(spec: &JobSpec) -> Variant {
        match spec.fork {
            ForkRole::None | ForkRole::Child { .. } => Variant::COLD,
            ForkRole::Template {
                children_uid_base,
                children_uid_count,
            } => Variant::template(children_uid_base, children_uid_count),
        }
    }

    /// A fork template's, for children of host ids `[base, base + count)`.
    fn template(base: u32, count: u32) -> Variant {
        Variant {
            pid_namespace: false,
            children_ids: Some(ChildIds { base, count }),
            proc: ProcView::ForChildren {
                // The range's last id runs environment builds, which never
                // see a template's root: no session is it.
                keeper: TEMPLATE_CHILD_UIDS + count.saturating_sub(1),
            },
            seccomp: SeccompScope::UnderChildren,
            per_user_rlimits: false,
            landlock: false,
            python_dies_with_init: true,
            shm: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::fixture::spec;

    #[test]
    fn a_cold_jail_and_a_child_depart_in_nothing() {
        assert_eq!(Variant::of(&spec()), Variant::COLD);
        let child = JobSpec {
            fork: ForkRole::Child {
                template_python: 42,
            },
            ..spec()
        };
        assert_eq!(Variant::of(&child), Variant::COLD);
    }

    #[test]
    fn a_template_departs_in_each_documented_way() {
        let t = Variant::of(&JobSpec {
            fork: ForkRole::Template {
                children_uid_base: 200_000,
                children_uid_count: 100,
            },
            ..spec()
        });
        assert!(!t.pid_namespace);
        assert_eq!(
            t.children_ids,
            Some(ChildIds {
                base: 200_000,
                count: 100
            })
        );
        assert_eq!(
            t.proc,
            ProcView::ForChildren {
                keeper: TEMPLATE_CHILD_UIDS + 99
            }
        );
        assert_eq!(t.seccomp, SeccompScope::UnderChildren);
        assert!(!t.per_user_rlimits && !t.landlock && t.python_dies_with_init && !t.shm);
    }
}
