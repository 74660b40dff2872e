//! The supervisor socket: listener, peer check, framed connections, request
//! dispatch. The transport knows nothing about sessions or runs; a
//! [`Handler`] answers each request.

mod budget;
mod config;
mod connection;
mod events;
mod handler;
mod listener;
mod peer;
mod requests;
mod slots;

pub use crate::accounts::NOBODY_UID;
pub use config::{ConnectionLimits, ServerConfig, ServerError};
pub use events::EventSink;
pub use handler::{Ctx, Handler};
pub use listener::serve;
pub use peer::Peer;
