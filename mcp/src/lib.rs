//! The MCP front-end: the five PRIMS tools and a prompt over streamable
//! HTTP (rmcp in axum), plus `/artifacts`, `/health` and `/metrics`.
//!
//! It is unprivileged and never touches a workspace itself: every file
//! operation and every run goes through the supervisor socket, on
//! connections from the supervisor pool (`pool`). Outbound HTTP for
//! `mount_file`, `files[]` and `persist_artifact` goes through [`egress`].
//!
//! The public surface is what the `prims` binary and the tests use:
//! [`serve`] with its options and error, the configuration types, and
//! [`egress`]; everything else is `pub(crate)`.

// The modules are in layers, lowest first, as `mcp/layers.txt` lists them:
// a module imports only from those below it (tests/tests/layout.rs).

mod auth;
mod config;
pub mod egress;
mod error;
mod handler;
mod http;
mod metrics;
mod paths;
mod pool;
mod prompt;
mod resources;
mod server;
mod sessions;
mod state;
mod streaming;
mod tasks;
mod tools;
mod uri;
mod watch;

pub use config::{ConfigError, FrontendConfig, TokenEntry};
pub use http::{serve, FrontendError, FrontendOptions};
