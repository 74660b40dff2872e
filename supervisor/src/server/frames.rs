//! Async frame reading. prims-protocol keeps its own async I/O behind the
//! `client` feature; the server needs only this, over the shared header check.

use prims_protocol::frame::{body_len, FrameError, HEADER_BYTES};
use tokio::io::{AsyncRead, AsyncReadExt};

/// One frame body; `Ok(None)` on a clean end of stream between frames.
pub(super) async fn read_frame<R: AsyncRead + Unpin>(
    r: &mut R,
) -> Result<Option<Vec<u8>>, FrameError> {
    let mut header = [0u8; HEADER_BYTES];
    let mut got = 0;
    while got < HEADER_BYTES {
        match r.read(&mut header[got..]).await? {
            0 if got == 0 => return Ok(None),
            0 => return Err(FrameError::Truncated),
            n => got += n,
        }
    }
    // Checked before the allocation: a hostile header costs nothing.
    let mut body = vec![0u8; body_len(header)?];
    r.read_exact(&mut body).await.map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => FrameError::Truncated,
        _ => FrameError::Io(e),
    })?;
    Ok(Some(body))
}
