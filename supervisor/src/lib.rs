//! prims-supervisor runs jobs on the host: it prepares environments and
//! workspaces, turns policy plus a request into a job spec, and drives one
//! jailer process per run. The daemon serves these over a socket.
//!
//! The public surface is what the `prims` binary, the tests and the
//! benchmarks use; everything else is `pub(crate)`.
//!
//! It is the only privileged process, and owns the state directory
//! (sessions and their metadata, environments, the package cache, the
//! audit log), the policy in force, the cgroup subtree, the run queue, the
//! live interpreters and the egress proxy process. It must never:
//!
//! - run untrusted code itself: a run's code, every package a session asks
//!   for and every step of an environment build run in a jail assembled by
//!   [`job::Jails`]. On the host it runs only the admin's tools
//!   (e2fsprogs on images it made, `groupadd` and `useradd`, the egress
//!   proxy, and pip installing uv itself from the policy's index, wheels
//!   only), and never a file of a workspace;
//! - unpickle or otherwise evaluate what jailed code wrote: saved globals
//!   are restored inside the jail, and an interpreter's channel is hostile
//!   input, read within size caps and deadlines, with what the cgroup can
//!   measure taken from the cgroup;
//! - follow a path out of a workspace: every file operation walks from the
//!   workspace root with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`
//!   ([`fsops`]), so a symlink planted by jailed code leads nowhere;
//! - write a session id down: on disk, in mount tables and in logs a
//!   session is known by its keyed name ([`sessions`]);
//! - let a peer in on more than its `SO_PEERCRED` uid (never `nobody`), or
//!   act for one tenant on another's session ([`server`]);
//! - map host root into a jail, or give two sessions one host uid.

pub mod accounts;
pub mod audit;
pub mod checkpoints;
pub mod daemon;
pub mod egress;
pub mod envs;
pub mod fsops;
pub(crate) mod interpreters;
pub use interpreters::fork::budgets::raised as fork_budgets_raised;
pub use interpreters::fork::budgets::shortfalls as fork_budget_shortfalls;
pub mod job;
pub mod script;
pub mod server;
pub mod sessions;
pub mod tasks;
pub(crate) mod volume;
pub(crate) mod workspace;
