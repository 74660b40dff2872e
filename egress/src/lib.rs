//! The way out of PRIMS.
//!
//! - [`guard`]: the addresses and names that are never the public internet,
//!   shared by the front-end's transfers and the egress proxy;
//! - the egress proxy of jailed code: [`http`] reads a client's request
//!   head (its lines checked by [`headers`]), [`decide`] judges its target
//!   against the run's allow-list and the guard (names resolved by
//!   [`resolve`]), [`serve`] applies the budgets of the [`run`] while
//!   [`relay`] splices the bytes of a tunnel it does not inspect, and
//!   [`log`] records every decision for the run's result;
//! - inspection: [`tls`] ends a jail's TLS with a leaf of the server's CA
//!   and verifies the upstream's; [`inspect`] checks each request in
//!   between, where [`secrets`] puts values in place of placeholders;
//! - the proxy process: [`identity`] makes it its own account's, out of
//!   reach of every other process but root's, [`confine`] drops what it
//!   does not need, then [`process`] serves what the supervisor sends over
//!   [`control`].
//!
//! It owns the one answer to "which addresses are never reachable" and
//! the whole egress proxy. It must never:
//!
//! - relay to an address the guard refuses unless the run's own list names
//!   that address (an IP or CIDR entry), or the admin's index hosts are
//!   trusted as they resolve ([`decide::Rules`]);
//! - let a jail choose where a name leads: the proxy resolves names itself;
//! - let a call's rules, budgets or connections outlive the call, or one
//!   run's traffic count against another's;
//! - serve a jail as root's effective uid or as `nobody`, with a
//!   capability, or before Landlock leaves it only reading files
//!   ([`identity`], [`confine`]).

pub mod confine;
pub mod control;
pub mod decide;
pub mod guard;
pub mod headers;
pub mod http;
pub mod identity;
pub mod inspect;
pub mod log;
pub mod process;
pub mod relay;
pub mod resolve;
pub mod run;
pub mod secrets;
pub mod serve;
pub mod tls;
