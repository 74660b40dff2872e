//! The supervisor daemon: the request handler behind the socket, wiring
//! sessions, environments, the scheduler and the jailer together.

mod branch;
mod handler;
mod mount;
mod pip;
mod ready;
mod record;
mod replies;
mod requirements;
mod room;
mod run;
mod scheduler;
mod startup;
mod state;
mod task;

pub use startup::{start, DaemonConfig, SUPERVISOR_LEAF};
pub use state::Daemon;
