//! The namespaces of a template's child that its adopted jail's init
//! joins.

use nix::sched::CloneFlags;

/// The child's namespaces the init joins, in the order it must join them:
/// the user namespace first, which gives it capabilities over the rest.
/// The pid namespace is the init's own, which the child then joins.
pub const NAMESPACES: [(&str, CloneFlags); 5] = [
    ("user", CloneFlags::CLONE_NEWUSER),
    ("mnt", CloneFlags::CLONE_NEWNS),
    ("net", CloneFlags::CLONE_NEWNET),
    ("uts", CloneFlags::CLONE_NEWUTS),
    ("ipc", CloneFlags::CLONE_NEWIPC),
];

/// The name of the namespace `flag` stands for, for errors.
pub fn name(flag: CloneFlags) -> &'static str {
    NAMESPACES
        .iter()
        .find(|(_, f)| *f == flag)
        .map_or("?", |(n, _)| n)
}
