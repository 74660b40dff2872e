//! The way out of PRIMS.
//!
//! - [`guard`]: the addresses and names that are never the public internet,
//!   shared by the front-end's transfers and the egress proxy.

pub mod guard;
