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

// Layers, lowest first: a module imports only the modules listed before it.
//
//     config      the front-end's TOML: bearer tokens, origins, hosts
//     error       ToolError, the failure a model reads
//     paths       the relative paths the tools take, a path's name and type
//     uri         prims://sessions/{session_id}/{+path}, the resource URIs
//     egress      outbound HTTP behind prims-egress's guard
//     metrics     the counters behind /metrics
//     streaming   a run's output as progress and log notifications
//     pool        the connections to the supervisor
//     auth        bearer tokens to tenants
//     sessions    which workspace a call uses, and who may use it
//     watch       resource subscriptions, told of the runs that end
//     state       AppState, what every handler shares
//     server      PrimsServer, the handler value
//     resources   the resource methods: list, read, subscribe
//     tools       the five tools, through one shim
//     prompt      the python_programmer prompt
//     tasks       run_code as an MCP task
//     handler     the MCP methods, and how a handler is made
//     http        the axum router, /artifacts, /health, /metrics, serve

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
