//! The bounds a policy value must stay within, shared by the rules and by
//! limit merging.

use crate::units::{ByteSize, HumanDuration};

pub const MIN_MEMORY: ByteSize = ByteSize::mib(16);
pub const MIN_PIDS: u64 = 4;
pub const MIN_OPEN_FILES: u64 = 16;
pub const MAX_OPEN_FILES: u64 = 1_048_576;
pub const MIN_TMP_SIZE: ByteSize = ByteSize::mib(1);
pub const MIN_OUTPUT_BYTES: ByteSize = ByteSize::kib(1);
pub const MAX_RUN_TIME: HumanDuration = HumanDuration::secs(24 * 3600);
/// cpu_millis must not round to 0.
pub const MIN_CPUS: f64 = 0.001;
pub const MIN_UID_BASE: u32 = 1000;
/// The kernel reserves (uid_t)-1; the top usable uid is one below it.
pub const MAX_UID_END: u64 = 4_294_967_294;
/// `nobody` (the overflow uid) must never be a jail identity.
pub const OVERFLOW_UID: u64 = 65_534;
/// uv resolving and unpacking a large set needs a few hundred MiB.
pub const MIN_BUILD_MEMORY: ByteSize = ByteSize::mib(256);

/// An ext4 image smaller than this has no room left for files.
pub const MIN_DISK_QUOTA: ByteSize = ByteSize::mib(1);
/// Smallest build volume: an empty venv and uv's bookkeeping.
pub const MIN_BUILD_DISK: ByteSize = ByteSize::mib(64);

/// Warm interpreters hold ~70 MiB each with pandas imported.
pub const MAX_POOL_SIZE: u32 = 64;
pub const MAX_PREWARM_IMPORTS: usize = 32;
/// It travels in one channel frame to each spare.
pub const MAX_WARM_UP_CODE: usize = 16 * 1024;
pub const MAX_INTERRUPT_GRACE: HumanDuration = HumanDuration::secs(60);
/// The longest `interpreters.save_timeout`: a save holds only its own session.
pub const MAX_SAVE_TIMEOUT: HumanDuration = HumanDuration::secs(60);
/// An autosave this late would bound nothing a user notices.
pub const MAX_AUTOSAVE_AFTER: HumanDuration = HumanDuration::secs(3600);
