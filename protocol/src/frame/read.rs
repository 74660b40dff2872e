//! Reading frames. A body is allocated as its bytes arrive, never from the
//! header's word alone, and only within what the reader's [`BodyBudget`]
//! covers. With a deadline, a frame that has started must end within it;
//! between frames a stream may stay idle for as long as it likes.

use super::budget::{BodyBudget, BodyLease, Unbudgeted};
use super::codec::{body_len, HEADER_BYTES};
use super::error::FrameError;
use crate::wire::MAX_FRAME_BYTES;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};

/// The first allocation for a body; it doubles as the bytes fill it.
const FIRST_CHUNK: usize = 8 * 1024;

/// Reads frame bodies from `R`, one [`FrameReader::next`] at a time.
#[derive(Debug)]
pub struct FrameReader<R, B = Unbudgeted> {
    rd: R,
    budget: B,
    deadline: Option<Duration>,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// A reader with no deadline and no budget.
    pub fn new(rd: R) -> Self {
        FrameReader {
            rd,
            budget: Unbudgeted,
            deadline: None,
        }
    }
}

impl<R: AsyncRead + Unpin, B: BodyBudget> FrameReader<R, B> {
    /// Each frame must complete within `deadline` of its first byte.
    pub fn with_deadline(self, deadline: Duration) -> Self {
        FrameReader {
            deadline: Some(deadline),
            ..self
        }
    }

    /// Bodies grow only as far as `budget` covers.
    pub fn with_budget<C: BodyBudget>(self, budget: C) -> FrameReader<R, C> {
        FrameReader {
            rd: self.rd,
            budget,
            deadline: self.deadline,
        }
    }

    /// The next frame's body, at most `max` bytes (and never more than
    /// [`MAX_FRAME_BYTES`]); `Ok(None)` on a clean end of stream between
    /// frames.
    pub async fn next(&mut self, max: usize) -> Result<Option<Vec<u8>>, FrameError> {
        let mut header = [0u8; HEADER_BYTES];
        let first = self.rd.read(&mut header).await?;
        if first == 0 {
            return Ok(None);
        }
        let deadline = self.deadline;
        let rest = self.rest(header, first, max);
        let body = match deadline {
            None => rest.await,
            Some(deadline) => tokio::time::timeout(deadline, rest)
                .await
                .map_err(|_| FrameError::Deadline(deadline))?,
        };
        body.map(Some)
    }

    /// The rest of a frame whose first `got` header bytes have arrived.
    async fn rest(
        &mut self,
        mut header: [u8; HEADER_BYTES],
        mut got: usize,
        max: usize,
    ) -> Result<Vec<u8>, FrameError> {
        while got < HEADER_BYTES {
            match self.rd.read(&mut header[got..]).await? {
                0 => return Err(FrameError::Truncated),
                n => got += n,
            }
        }
        let len = body_len(header, max)?;
        let mut lease = self.budget.lease();
        let mut body = Vec::new();
        while body.len() < len {
            if body.len() == body.capacity() {
                let capacity = (body.capacity() * 2).clamp(FIRST_CHUNK.min(len), len);
                lease
                    .cover(capacity)
                    .await
                    .map_err(|e| FrameError::Budget(Box::new(e)))?;
                body.reserve_exact(capacity - body.len());
            }
            // Bounded by what is left of this frame: the next one's bytes stay
            // in the stream.
            let left = (len - body.len()) as u64;
            // read_buf fills the spare capacity without zeroing it first, so
            // memory is touched only as bytes arrive.
            if (&mut self.rd).take(left).read_buf(&mut body).await? == 0 {
                return Err(FrameError::Truncated);
            }
        }
        Ok(body)
    }
}

/// Read one frame body with no deadline and no budget. `Ok(None)` is a
/// clean end of stream between frames; an end inside a frame is
/// [`FrameError::Truncated`].
pub async fn read_frame<R: AsyncRead + Unpin + ?Sized>(
    r: &mut R,
) -> Result<Option<Vec<u8>>, FrameError> {
    FrameReader::new(r).next(MAX_FRAME_BYTES).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::codec::encode;
    use crate::wire::Hello;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use tokio::io::{duplex, AsyncWriteExt};
    use tokio::time::Instant;

    const MIB: usize = 1024 * 1024;

    fn frame(body: &[u8]) -> Vec<u8> {
        let mut v = (body.len() as u32).to_be_bytes().to_vec();
        v.extend_from_slice(body);
        v
    }

    /// Covers up to `cap` bytes per frame and remembers the most it was asked for.
    #[derive(Clone, Default)]
    struct Capped {
        cap: usize,
        most: Arc<AtomicUsize>,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("{need} bytes are over the cap of {cap}")]
    struct OverCap {
        need: usize,
        cap: usize,
    }

    impl BodyBudget for Capped {
        type Lease = Capped;
        fn lease(&self) -> Capped {
            self.clone()
        }
    }

    impl BodyLease for Capped {
        type Error = OverCap;
        async fn cover(&mut self, need: usize) -> Result<(), OverCap> {
            self.most.fetch_max(need, Ordering::SeqCst);
            match need <= self.cap {
                true => Ok(()),
                false => Err(OverCap {
                    need,
                    cap: self.cap,
                }),
            }
        }
    }

    #[tokio::test]
    async fn frames_back_to_back_then_a_clean_end() {
        let big: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        let mut bytes = frame(b"{}");
        bytes.extend(frame(&big));
        bytes.extend(frame(b""));
        let (mut tx, rx) = duplex(1 << 20);
        tx.write_all(&bytes).await.unwrap();
        drop(tx);
        let mut r = FrameReader::new(rx);
        assert_eq!(r.next(MIB).await.unwrap().unwrap(), b"{}");
        assert_eq!(r.next(MIB).await.unwrap().unwrap(), big);
        assert_eq!(r.next(MIB).await.unwrap().unwrap(), b"");
        assert!(r.next(MIB).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn frames_arriving_in_pieces_read_whole() {
        let body: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        let mut bytes = frame(&body);
        bytes.extend(frame(b"[1]"));
        // A 3-byte pipe: every header and body arrives split across reads.
        let (mut tx, rx) = duplex(3);
        let writer = tokio::spawn(async move {
            for piece in bytes.chunks(5) {
                tx.write_all(piece).await.unwrap();
            }
        });
        let mut r = FrameReader::new(rx).with_deadline(Duration::from_secs(60));
        assert_eq!(r.next(MIB).await.unwrap().unwrap(), body);
        assert_eq!(r.next(MIB).await.unwrap().unwrap(), b"[1]");
        writer.await.unwrap();
        assert!(r.next(MIB).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn an_end_inside_a_frame_is_truncation() {
        let whole = frame(b"{\"a\":1}");
        for cut in [1, HEADER_BYTES - 1, HEADER_BYTES, HEADER_BYTES + 3] {
            let (mut tx, rx) = duplex(64);
            tx.write_all(&whole[..cut]).await.unwrap();
            drop(tx);
            let got = FrameReader::new(rx).next(MIB).await;
            assert!(
                matches!(got, Err(FrameError::Truncated)),
                "cut {cut}: {got:?}"
            );
        }
    }

    #[tokio::test]
    async fn frames_over_the_limit_are_refused_from_the_header() {
        let (mut tx, rx) = duplex(64);
        tx.write_all(&frame(b"{\"a\":1}")).await.unwrap();
        let got = FrameReader::new(rx).next(3).await;
        assert!(
            matches!(got, Err(FrameError::TooLarge { len: 7, max: 3 })),
            "{got:?}"
        );

        // Nothing of the body is needed to refuse it, nor asked of the budget.
        let (mut tx, rx) = duplex(64);
        tx.write_all(&[0xff; HEADER_BYTES]).await.unwrap();
        let budget = Capped::default();
        let got = FrameReader::new(rx)
            .with_budget(budget.clone())
            .next(usize::MAX)
            .await;
        assert!(
            matches!(
                got,
                Err(FrameError::TooLarge {
                    len: 0xffff_ffff,
                    max: MAX_FRAME_BYTES
                })
            ),
            "{got:?}"
        );
        assert_eq!(budget.most.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn a_stalled_frame_misses_its_deadline() {
        let deadline = Duration::from_millis(200);
        let (mut tx, rx) = duplex(1024);
        tx.write_all(&frame(&[b' '; 100])[..10]).await.unwrap();
        let started = Instant::now();
        let got = FrameReader::new(rx).with_deadline(deadline).next(MIB).await;
        assert!(
            matches!(got, Err(FrameError::Deadline(d)) if d == deadline),
            "{got:?}"
        );
        assert!(started.elapsed() >= deadline);
        drop(tx);
    }

    #[tokio::test]
    async fn idle_time_between_frames_is_not_a_deadline() {
        let deadline = Duration::from_millis(50);
        let (mut tx, rx) = duplex(1024);
        let mut r = FrameReader::new(rx).with_deadline(deadline);
        let writer = tokio::spawn(async move {
            tokio::time::sleep(deadline * 4).await;
            tx.write_all(&frame(b"late")).await.unwrap();
            tx
        });
        assert_eq!(r.next(MIB).await.unwrap().unwrap(), b"late");
        drop(writer.await.unwrap());
        assert!(r.next(MIB).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn the_body_grows_with_the_bytes_not_with_the_header() {
        let (mut tx, rx) = duplex(1 << 20);
        let budget = Capped {
            cap: usize::MAX,
            ..Capped::default()
        };
        let mut r = FrameReader::new(rx).with_budget(budget.clone());
        tx.write_all(&(8u32 << 20).to_be_bytes()).await.unwrap();
        tx.write_all(&[b'x'; 100]).await.unwrap();
        let mut reading = Box::pin(r.next(8 << 20));
        // Everything written so far is read before the reader waits for more.
        let waited = tokio::time::timeout(Duration::from_millis(50), &mut reading).await;
        assert!(waited.is_err(), "an 8 MiB frame completed from 100 bytes");
        assert_eq!(budget.most.load(Ordering::SeqCst), FIRST_CHUNK);
        tx.write_all(&vec![b'y'; 64 * 1024]).await.unwrap();
        let waited = tokio::time::timeout(Duration::from_millis(50), &mut reading).await;
        assert!(waited.is_err(), "an 8 MiB frame completed early");
        let most = budget.most.load(Ordering::SeqCst);
        assert!(
            most <= 2 * (64 * 1024 + 100),
            "{most} bytes asked for 64 KiB"
        );
    }

    #[tokio::test]
    async fn a_body_the_budget_refuses_ends_the_read() {
        let (mut tx, rx) = duplex(1 << 20);
        tx.write_all(&frame(&[b'z'; 100 * 1024])).await.unwrap();
        let budget = Capped {
            cap: 16 * 1024,
            ..Capped::default()
        };
        let mut r = FrameReader::new(rx).with_budget(budget);
        match r.next(MIB).await {
            Err(FrameError::Budget(e)) => {
                assert_eq!(e.to_string(), "32768 bytes are over the cap of 16384")
            }
            other => panic!("{other:?}"),
        }
        // A frame within the budget reads as ever.
        let (mut tx, rx) = duplex(1 << 20);
        tx.write_all(&frame(&[b'z'; 16 * 1024])).await.unwrap();
        let budget = Capped {
            cap: 16 * 1024,
            ..Capped::default()
        };
        let got = FrameReader::new(rx).with_budget(budget).next(MIB).await;
        assert_eq!(got.unwrap().unwrap().len(), 16 * 1024);
    }

    #[tokio::test]
    async fn read_frame_reads_one_frame_at_a_time() {
        let hello = encode(&Hello {
            protocol: 1,
            client: "t".into(),
        })
        .unwrap();
        let (mut tx, mut rx) = duplex(1024);
        tx.write_all(&hello).await.unwrap();
        tx.write_all(&hello[..HEADER_BYTES + 2]).await.unwrap();
        drop(tx);
        let body = read_frame(&mut rx).await.unwrap().unwrap();
        assert_eq!(body, &hello[HEADER_BYTES..]);
        assert!(matches!(
            read_frame(&mut rx).await,
            Err(FrameError::Truncated)
        ));
        let mut empty: &[u8] = &[];
        assert!(read_frame(&mut empty).await.unwrap().is_none());
    }
}
