//! Async client for the supervisor socket. One connection carries many
//! concurrent requests: a reader task routes each response to its call by id,
//! a writer task serializes outgoing frames. When the connection drops, every
//! pending call ends with [`ClientError::Disconnected`]. Each request has a
//! typed method (`open_session`, `read_file`, `run`, ...); [`Client::call`]
//! and [`Client::request`] take any request body.

mod branch;
mod call;
mod connection;
mod error;
mod shared;
mod typed;

pub use call::{Call, MountUpload, Mounted};
pub use connection::Client;
pub use error::ClientError;
