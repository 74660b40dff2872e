//! Writing frames.

use super::error::FrameError;
use tokio::io::{AsyncWrite, AsyncWriteExt};

/// Write one encoded frame (as made by [`super::codec::encode`]) and flush it.
pub async fn write_frame<W: AsyncWrite + Unpin + ?Sized>(
    w: &mut W,
    frame: &[u8],
) -> Result<(), FrameError> {
    w.write_all(frame).await?;
    w.flush().await?;
    Ok(())
}
