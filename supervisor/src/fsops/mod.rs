//! Workspace file operations that never follow a planted symlink out.
//!
//! Every operation opens the workspace root as an `O_PATH` fd and resolves
//! the caller's path relative to it with `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)`; nothing joins strings into a
//! host path. Reads follow symlinks only while they stay inside the workspace
//! (an absolute or escaping link fails with EXDEV, reported as Forbidden).
//! Writes and the output walk follow no symlink at all. All functions are
//! blocking: call them from `spawn_blocking`.

mod copy;
mod dir;
mod error;
mod mount;
mod path;
mod read;
mod root;
mod snapshot;
mod sys;
mod usage;

pub use copy::{clear_tree, copy_path, copy_tree, remove_path, Copied, CopyLimits};
pub use dir::{list_dir, MAX_DIR_ENTRIES};
pub use error::FsError;
pub use mount::{write_mount, write_mount_up_to};
pub use read::read_file;
pub use snapshot::{diff, snapshot_output, Snapshot};
pub(crate) use usage::is_mount_point;
pub use usage::{block_size, disk_usage, disk_used, Usage};
