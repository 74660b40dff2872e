//! prims-supervisor runs jobs on the host: it prepares environments and
//! workspaces, turns policy plus a request into a job spec, and drives one
//! jailer process per run. The daemon serves these over a socket.
//!
//! The public surface is what the `prims` binary, the tests and the
//! benchmarks use; everything else is `pub(crate)`.

pub mod accounts;
pub mod audit;
pub mod daemon;
pub mod egress;
pub mod envs;
pub mod fsops;
pub(crate) mod interpreters;
pub mod job;
pub mod script;
pub mod server;
pub mod sessions;
pub mod tasks;
pub(crate) mod volume;
pub(crate) mod workspace;
