//! The MCP front-end: the five PRIMS tools and a prompt over streamable
//! HTTP (rmcp in axum), plus `/artifacts`, `/health` and `/metrics`.
//!
//! It is unprivileged and never touches a workspace itself: every file
//! operation and every run goes through the supervisor socket, on
//! connections from [`pool::SupervisorPool`]. Outbound HTTP for
//! `mount_file`, `files[]` and `persist_artifact` goes through [`egress`].

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
