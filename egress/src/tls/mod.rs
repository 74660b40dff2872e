//! TLS in the egress proxy, for hosts it inspects: the jail's side is
//! served a leaf of the server's own CA ([`authority`]) once its server
//! name is checked ([`accept`]), and the upstream's side is verified
//! against the system's roots and the admin's `network.upstream_ca`
//! ([`upstream`]), whatever the jail would have accepted.

pub mod accept;
pub mod authority;
mod error;
pub mod upstream;

pub use error::{provider, TlsError};
