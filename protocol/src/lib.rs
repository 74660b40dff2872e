//! The records that cross process boundaries: the job spec a jailer reads and
//! the outcome it writes back. Plain data with serde, no behaviour.

pub mod b64;
#[cfg(feature = "client")]
pub mod client;
pub mod frame;
mod job;
mod outcome;
pub mod wire;

pub use job::{Bind, CgroupBackend, CgroupSpec, JobLimits, JobSpec, LimitRequest, NetworkMode};
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
