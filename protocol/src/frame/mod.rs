//! Framing for the supervisor socket: a 4-byte big-endian length, then that
//! many bytes of JSON. The length is checked against [`crate::wire::MAX_FRAME_BYTES`]
//! before anything is allocated for the body, so a hostile header costs
//! nothing.
//!
//! The codec here is plain functions on bytes. With the `io` feature, the
//! async side is here too, one reader and one writer for both ends of the
//! socket: `FrameReader` reads as a client needs (no deadline, no budget) or
//! as the server needs against a hostile peer (a per-frame deadline from its
//! first byte, a per-connection size limit, and a body that grows within a
//! `BodyBudget` as its bytes arrive).

mod codec;
mod error;

#[cfg(feature = "io")]
mod budget;
#[cfg(feature = "io")]
mod read;
#[cfg(feature = "io")]
mod write;

pub use codec::{body_len, decode, encode, split_frame, HEADER_BYTES};
pub use error::FrameError;

#[cfg(feature = "io")]
pub use budget::{BodyBudget, BodyLease, Unbudgeted};
#[cfg(feature = "io")]
pub use read::{read_frame, FrameReader};
#[cfg(feature = "io")]
pub use write::write_frame;
