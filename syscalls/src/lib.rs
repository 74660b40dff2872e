//! x86_64 syscalls by name, for the two crates that speak of them: policy
//! validation (is `seccomp.extra_deny` naming real calls?) and the jailer's
//! seccomp filters (which numbers to refuse). Kept apart from both so the
//! jailer does not link the policy parser.
//!
//! - [`number`], [`name`], [`is_known`], [`all`]: the syscall table;
//! - [`ALWAYS_DENIED`]: the calls the jail refuses for every job;
//! - [`landlock_abi`]: the Landlock ABI the kernel offers.
//!
//! Only x86_64 Linux is supported; elsewhere the table is empty and every
//! lookup fails.
//!
//! It owns these facts as data. It must never depend on another PRIMS
//! crate (the jailer and the policy parser both stand on it, and the jailer
//! must not reach the parser through it), hold state, or make a syscall
//! other than the read-only Landlock ABI query.

mod always_denied;
mod landlock;
mod table;

pub use always_denied::ALWAYS_DENIED;
pub use landlock::landlock_abi;
pub use table::{all, is_known, name, number};
