//! The MCP front-end: the five PRIMS tools and a prompt over streamable
//! HTTP (rmcp in axum), plus `/artifacts`, `/health` and `/metrics`.
//!
//! It is unprivileged and never touches a workspace itself: every file
//! operation and every run goes through the supervisor socket, on
//! connections from [`pool::SupervisorPool`]. Outbound HTTP for
//! `mount_file`, `files[]` and `persist_artifact` goes through [`egress`].
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

pub mod auth;
pub mod config;
pub mod egress;
pub mod error;
pub mod handler;
pub mod http;
pub mod metrics;
pub mod pool;
pub mod prompt;
pub mod resources;
pub mod server;
pub mod sessions;
pub mod state;
pub mod streaming;
pub mod tasks;
pub mod tools;

pub use config::{FrontendConfig, TokenEntry};
pub use http::{serve, FrontendError, FrontendOptions};
pub use server::PrimsServer;
