//! The jailer's side channel: the job spec it reads on one inherited fd and
//! the outcome it writes on another. Never sent over the supervisor socket
//! as such; [`crate::wire`] embeds only the parts a client sees.

mod job;
mod outcome;

pub use job::{
    Bind, CgroupBackend, CgroupSpec, CpuClass, ForkRole, JobLimits, JobSpec, LimitRequest,
    NetworkMode, JAIL_INOTIFY_INSTANCES, JAIL_INOTIFY_WATCHES, JAIL_PENDING_SIGNALS,
    TEMPLATE_CHILD_UIDS, VENV_PYTHON,
};
pub use outcome::{Enforced, Enforcement, Outcome, SetupError, Status};

/// Largest job spec a jailer accepts: the code is capped far below this.
pub const MAX_SPEC_BYTES: usize = 4 * 1024 * 1024;

/// Parse a job spec, refusing oversized input before decoding it.
pub fn decode_spec(bytes: &[u8]) -> Result<JobSpec, DecodeError> {
    if bytes.len() > MAX_SPEC_BYTES {
        return Err(DecodeError::TooLarge {
            len: bytes.len(),
            max: MAX_SPEC_BYTES,
        });
    }
    serde_json::from_slice(bytes).map_err(DecodeError::Json)
}

#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("job spec is {len} bytes; the limit is {max}")]
    TooLarge { len: usize, max: usize },
    #[error("job spec is not valid: {0}")]
    Json(#[source] serde_json::Error),
}
