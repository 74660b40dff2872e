//! prims-supervisor runs jobs on the host: it prepares venvs and workspaces,
//! turns policy plus a request into a job spec, and drives one jailer process
//! per run. The daemon that serves these over a socket builds on this crate.

pub mod audit;
pub mod cgroups;
pub mod daemon;
pub mod envs;
pub mod frontend_user;
pub mod fsops;
pub mod runner;
pub mod server;
pub mod sessions;
pub mod spec;
pub mod teardown;
pub mod venv;
pub mod volume;
pub mod workspace;

pub use runner::{run_job, Cancel, RunError, RunResult, Stream};
