//! Reading frames from a peer that sets its own pace: a frame that has
//! started must end within a deadline, and its body is allocated as its
//! bytes arrive (within the shared [`FrameBudget`]), never from the header's
//! word alone. Between frames a connection may stay idle for as long as it
//! likes. prims-protocol keeps its own async reader for clients; both share
//! the header check.

use super::budget::{BudgetError, FrameBudget};
use prims_protocol::frame::{body_len, FrameError, HEADER_BYTES};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};

/// The first allocation for a body; it doubles as the bytes fill it.
const FIRST_CHUNK: usize = 8 * 1024;

#[derive(Debug, thiserror::Error)]
pub(super) enum ReadError {
    #[error(transparent)]
    Frame(#[from] FrameError),
    #[error("a frame of {len} bytes exceeds the limit of {max} here")]
    TooLarge { len: usize, max: usize },
    #[error("a frame did not complete within {0:?} of its first byte")]
    Deadline(Duration),
    #[error(transparent)]
    Budget(#[from] BudgetError),
}

impl From<std::io::Error> for ReadError {
    fn from(e: std::io::Error) -> Self {
        ReadError::Frame(FrameError::Io(e))
    }
}

pub(super) struct FrameReader<R> {
    rd: R,
    budget: Arc<FrameBudget>,
    deadline: Duration,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    pub(super) fn new(rd: R, budget: Arc<FrameBudget>, deadline: Duration) -> Self {
        FrameReader {
            rd,
            budget,
            deadline,
        }
    }

    /// The next frame's body, at most `max` bytes; `Ok(None)` on a clean end
    /// of stream between frames.
    pub(super) async fn next(&mut self, max: usize) -> Result<Option<Vec<u8>>, ReadError> {
        let mut header = [0u8; HEADER_BYTES];
        let first = self.rd.read(&mut header).await?;
        if first == 0 {
            return Ok(None);
        }
        let deadline = self.deadline;
        match tokio::time::timeout(deadline, self.rest(header, first, max)).await {
            Ok(body) => body.map(Some),
            Err(_) => Err(ReadError::Deadline(deadline)),
        }
    }

    /// The rest of a frame whose first `got` header bytes have arrived.
    async fn rest(
        &mut self,
        mut header: [u8; HEADER_BYTES],
        mut got: usize,
        max: usize,
    ) -> Result<Vec<u8>, ReadError> {
        while got < HEADER_BYTES {
            match self.rd.read(&mut header[got..]).await? {
                0 => return Err(FrameError::Truncated.into()),
                n => got += n,
            }
        }
        let len = body_len(header)?;
        if len > max {
            return Err(ReadError::TooLarge { len, max });
        }
        let mut lease = self.budget.lease();
        let mut body = Vec::new();
        while body.len() < len {
            if body.len() == body.capacity() {
                let capacity = (body.capacity() * 2).clamp(FIRST_CHUNK.min(len), len);
                lease.cover(capacity).await?;
                body.reserve_exact(capacity - body.len());
            }
            // Bounded by what is left of this frame: the next one's bytes stay
            // in the socket.
            let left = (len - body.len()) as u64;
            // read_buf fills the spare capacity without zeroing it first, so
            // memory is touched only as bytes arrive.
            if (&mut self.rd).take(left).read_buf(&mut body).await? == 0 {
                return Err(FrameError::Truncated.into());
            }
        }
        Ok(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    fn frame(body: &[u8]) -> Vec<u8> {
        let mut v = (body.len() as u32).to_be_bytes().to_vec();
        v.extend_from_slice(body);
        v
    }

    fn reader<R: AsyncRead + Unpin>(rd: R) -> FrameReader<R> {
        FrameReader::new(rd, FrameBudget::new(16, 1 << 20), Duration::from_secs(5))
    }

    #[tokio::test]
    async fn frames_back_to_back_then_a_clean_end() {
        let big: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        let mut bytes = frame(b"{}");
        bytes.extend(frame(&big));
        bytes.extend(frame(b""));
        let mut r = reader(&bytes[..]);
        assert_eq!(r.next(1 << 20).await.unwrap().unwrap(), b"{}");
        assert_eq!(r.next(1 << 20).await.unwrap().unwrap(), big);
        assert_eq!(r.next(1 << 20).await.unwrap().unwrap(), b"");
        assert!(r.next(1 << 20).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn truncation_and_oversize_are_errors() {
        let whole = frame(b"{\"a\":1}");
        for cut in [2, HEADER_BYTES + 3] {
            let mut r = reader(&whole[..cut]);
            assert!(matches!(
                r.next(1 << 20).await,
                Err(ReadError::Frame(FrameError::Truncated))
            ));
        }
        let mut r = reader(&[0xff, 0xff, 0xff, 0xff][..]);
        assert!(matches!(
            r.next(1 << 20).await,
            Err(ReadError::Frame(FrameError::TooLarge { .. }))
        ));
        let mut r = reader(&whole[..]);
        assert!(matches!(
            r.next(3).await,
            Err(ReadError::TooLarge { len: 7, max: 3 })
        ));
    }

    #[tokio::test]
    async fn the_body_grows_with_the_bytes_not_with_the_header() {
        let (mut tx, rx) = tokio::io::duplex(1 << 20);
        let total = 8 << 20;
        let budget = FrameBudget::new(0, total);
        let mut r = FrameReader::new(rx, budget.clone(), Duration::from_secs(5));
        tx.write_all(&(8u32 << 20).to_be_bytes()).await.unwrap();
        tx.write_all(&[b'x'; 100]).await.unwrap();
        let mut reading = Box::pin(r.next(8 << 20));
        tokio::select! {
            _ = &mut reading => panic!("an 8 MiB frame completed from 100 bytes"),
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
        assert!(
            budget.available() >= total - FIRST_CHUNK,
            "the frame took {} bytes for 100 that arrived",
            total - budget.available()
        );
        tx.write_all(&vec![b'y'; 64 * 1024]).await.unwrap();
        tokio::select! {
            _ = &mut reading => panic!("an 8 MiB frame completed early"),
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
        assert!(total - budget.available() <= 2 * (64 * 1024 + 100));
        drop(reading);
        assert_eq!(
            budget.available(),
            total,
            "a dropped read gives its budget back"
        );
    }
}
