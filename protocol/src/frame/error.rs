//! What reading or writing a frame can fail with.

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// Over [`crate::wire::MAX_FRAME_BYTES`], or over the smaller limit the reader was
    /// given for this frame.
    #[error("a frame of {len} bytes exceeds the limit of {max}")]
    TooLarge { len: usize, max: usize },
    #[error("the stream ended in the middle of a frame")]
    Truncated,
    /// The frame started but did not end within the reader's deadline.
    #[error("a frame did not complete within {0:?} of its first byte")]
    Deadline(Duration),
    /// The reader's body budget refused the body; the budget's own error.
    #[error(transparent)]
    Budget(Box<dyn std::error::Error + Send + Sync>),
    #[error("malformed frame: {0}")]
    Json(#[from] serde_json::Error),
    #[error("frame i/o failed: {0}")]
    Io(#[from] std::io::Error),
}
