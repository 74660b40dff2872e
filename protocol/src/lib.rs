//! The records that cross process boundaries, in three groups kept apart:
//! [`jail`], what the supervisor and a jailer exchange over its inherited
//! file descriptors (the job spec in, the outcome out); [`wire`] with
//! [`frame`] and [`client`], the supervisor socket's messages, framing and
//! client; [`fork`], the fork wing's messages between a template's child,
//! the jailer that adopts it and the supervisor; and [`egress`], the egress
//! proxy's report of a run. Plain data
//! with serde; the only I/O is the optional async frame reader and writer
//! (feature `io`) and the client (feature `client`).
//!
//! It owns the shape of every record that crosses a process boundary and
//! the bounds on reading one ([`jail::MAX_SPEC_BYTES`],
//! [`wire::MAX_FRAME_BYTES`]), so both ends agree on them. It must never
//! depend on another PRIMS crate, decide anything (policy is
//! `prims-policy`'s), or act on the host: no process, file or cgroup work,
//! and no unsafe code.

#![forbid(unsafe_code)]

pub mod b64;
pub mod branch;
pub mod cell;
#[cfg(feature = "client")]
pub mod client;
pub mod egress;
pub mod fork;
pub mod frame;
pub mod history;
pub mod jail;
pub mod node;
pub mod wire;
