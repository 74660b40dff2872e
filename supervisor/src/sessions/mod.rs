//! Sessions: workspaces, metadata, quotas, uids, expiry, recovery.
//!
//! On disk, under `state_dir/sessions/` (0711, root):
//! - `<name>/`: the workspace the jail binds at /workspace, holding
//!   `output/` and `mounts/`, all owned by the session's host uid. In loop
//!   mode it is the mount point of the session's quota image.
//! - `<name>.img`: the ext4 quota image (loop mode only).
//! - `<name>.json`: the metadata, written atomically, never inside the
//!   workspace, which jailed code controls.
//! - `<name>.cells`: the session's recorded runs, for its notebook (see
//!   `history`), beside the metadata for the same reason.
//! - `<name>.run`: one byte, `1` while a run is in flight (see `run_flag`).
//!
//! A session id is 128 bits from getrandom as 32 lowercase hex characters;
//! ids from callers are checked for exactly that. The id is a capability
//! and is never stored: `<name>` is its keyed hash (see `key`), and only the
//! caller that opened the session knows the id. Every call names the tenant
//! it acts for; another tenant's session looks like a missing one.
//! The API is synchronous and some calls (create, close, open, sweep) take
//! tens of milliseconds: call them through `spawn_blocking`.

mod error;
mod history;
mod key;
mod layout;
mod meta;
mod migrate;
mod policy;
mod recover;
mod run_flag;
mod session;
mod shared;
mod store;
mod uids;

pub use error::SessionError;
pub use key::{SessionKey, KEY_FILE};
pub use meta::is_valid_id;
pub use policy::{QuotaMode, SessionPolicy};
pub use session::Session;
pub use store::{SessionStore, Spare, TEMPLATE_HOME_BYTES};
