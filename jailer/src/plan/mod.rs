//! The jail as data: what the jailer decides from a spec before anything is
//! applied. Nothing here mounts, forks, restricts or installs, so
//! `cargo test` checks it as any user, without namespaces.
//!
//! - [`spec`]: reading a spec and what the jailer refuses in one;
//! - [`landlock_access`]: which paths get which Landlock access, and TCP;
//! - [`program`]: the argv and environment python is exec'd with;
//! - [`python_fds`]: which fds python inherits, the channel on 3;
//! - [`seccomp_rules`]: which syscalls get ENOSYS or EPERM, and when;
//! - [`variant`]: how a fork template's jail departs from a cold one.
//!
//! The modules beside this one apply the results: `rootfs` and `init` build
//! the jail, `landlock_rules` restricts it, `seccomp` compiles and installs
//! the filters.

pub mod landlock_access;
pub mod program;
pub mod python_fds;
pub mod seccomp_rules;
pub mod spec;
pub mod variant;

#[cfg(test)]
pub(crate) mod fixture;
