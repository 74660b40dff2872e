//! The socket's settings: where it is, who may connect, and what each
//! peer may hold; and what can stop it from listening.

use std::path::PathBuf;
use std::time::Duration;

pub struct ServerConfig {
    pub socket: PathBuf,
    /// Uids allowed to connect besides root. [`crate::accounts::NOBODY_UID`] is never
    /// allowed, listed or not.
    pub allowed_uids: Vec<u32>,
    /// Group given to the socket file (mode 0660).
    pub socket_group: Option<u32>,
    pub limits: ConnectionLimits,
}

/// What one peer may hold on the socket. Every allowed peer is still treated
/// as hostile input: the front-end faces the network and may be compromised.
#[derive(Debug, Clone)]
pub struct ConnectionLimits {
    /// Open connections, all peers together.
    pub max_connections: usize,
    /// Open connections of one uid, so that one peer (say, a compromised
    /// front-end) cannot take every slot from the others.
    pub max_connections_per_uid: usize,
    /// In-flight requests per connection; more are answered `Busy`.
    pub max_requests_per_connection: usize,
    /// From accept to a complete `Hello`.
    pub hello_deadline: Duration,
    /// From a frame's first byte to its last. Idle time between frames is
    /// not limited: the front-end keeps its connections open.
    pub frame_deadline: Duration,
    /// Bytes every connection may hold for the frame it is reading without
    /// drawing on `partial_frame_budget`; requests are usually this small.
    pub frame_allowance: usize,
    /// Bytes held by partial frames beyond their allowance, all connections
    /// together. A frame that needs more waits (within its deadline).
    pub partial_frame_budget: usize,
}

impl Default for ConnectionLimits {
    /// The daemon's limits, as docs/architecture.md (The supervisor socket)
    /// states them.
    fn default() -> Self {
        ConnectionLimits {
            max_connections: 256,
            max_connections_per_uid: 128,
            max_requests_per_connection: 64,
            hello_deadline: Duration::from_secs(5),
            frame_deadline: Duration::from_secs(10),
            frame_allowance: 64 * 1024,
            partial_frame_budget: 32 * 1024 * 1024,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("refusing socket path {0}: it is a symbolic link")]
    Symlink(PathBuf),
    #[error("refusing socket path {0}: it exists and is not a socket")]
    NotASocket(PathBuf),
    #[error("another process is already listening on {0}")]
    InUse(PathBuf),
    #[error("socket {path}: {what}: {source}")]
    Io {
        path: PathBuf,
        what: &'static str,
        source: std::io::Error,
    },
}
