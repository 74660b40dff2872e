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
//!
//! It owns the MCP surface (tools, prompt, resources, tasks), the HTTP
//! checks in front of it (Host and Origin, bearer tokens naming tenants,
//! drain) and the outbound transfers. It must never:
//!
//! - run as root or as `nobody` (`prims mcp` and `prims serve` drop to the
//!   `prims` user or refuse), or link the supervisor: it reaches it only
//!   through `prims-protocol`'s client;
//! - make an outbound request to an address `prims-egress`'s guard refuses,
//!   or hold a whole download or upload in memory (bodies stream, capped);
//! - act for one tenant on another's session: every supervisor request
//!   names the caller's tenant;
//! - contain unsafe code.

#![forbid(unsafe_code)]

// The modules are in layers, lowest first, as `mcp/layers.txt` lists them:
// a module imports only from those below it (tests/tests/layout.rs).

mod auth;
mod config;
pub mod egress;
mod error;
mod handler;
mod http;
mod metrics;
mod notebook;
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
mod views;
mod watch;

pub use config::{ConfigError, FrontendConfig, TokenEntry};
pub use http::{serve, FrontendError, FrontendOptions};
