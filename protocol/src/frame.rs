//! Framing for the supervisor socket: a 4-byte big-endian length, then that
//! many bytes of JSON. The length is checked against [`MAX_FRAME_BYTES`]
//! before anything is allocated for the body, so a hostile header costs
//! nothing.

use crate::wire::MAX_FRAME_BYTES;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Bytes in the length prefix.
pub const HEADER_BYTES: usize = 4;

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {len} bytes exceeds the limit of {max}")]
    TooLarge { len: usize, max: usize },
    #[error("the stream ended in the middle of a frame")]
    Truncated,
    #[error("malformed frame: {0}")]
    Json(#[from] serde_json::Error),
    #[error("frame i/o failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Serialize `msg` as one frame, header included.
pub fn encode<T: Serialize + ?Sized>(msg: &T) -> Result<Vec<u8>, FrameError> {
    let mut buf = Vec::with_capacity(256);
    buf.extend_from_slice(&[0; HEADER_BYTES]);
    serde_json::to_writer(&mut buf, msg)?;
    let len = buf.len() - HEADER_BYTES;
    let header = u32::try_from(len)
        .ok()
        .filter(|_| len <= MAX_FRAME_BYTES)
        .ok_or(FrameError::TooLarge {
            len,
            max: MAX_FRAME_BYTES,
        })?;
    buf[..HEADER_BYTES].copy_from_slice(&header.to_be_bytes());
    Ok(buf)
}

/// The body length announced by a header, refused when over the limit.
pub fn body_len(header: [u8; HEADER_BYTES]) -> Result<usize, FrameError> {
    let len = u32::from_be_bytes(header) as usize;
    if len > MAX_FRAME_BYTES {
        return Err(FrameError::TooLarge {
            len,
            max: MAX_FRAME_BYTES,
        });
    }
    Ok(len)
}

/// Parse a frame body (without its header).
pub fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, FrameError> {
    Ok(serde_json::from_slice(body)?)
}

#[cfg(feature = "client")]
pub use io::{read_frame, write_frame};

#[cfg(feature = "client")]
mod io {
    use super::{body_len, FrameError, HEADER_BYTES};
    use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

    /// Read one frame body. `Ok(None)` is a clean end of stream between
    /// frames; an end inside a frame is [`FrameError::Truncated`].
    pub async fn read_frame<R: AsyncRead + Unpin>(
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
        let mut body = vec![0u8; body_len(header)?];
        r.read_exact(&mut body).await.map_err(truncated)?;
        Ok(Some(body))
    }

    /// Write one encoded frame (as made by [`super::encode`]).
    pub async fn write_frame<W: AsyncWrite + Unpin>(
        w: &mut W,
        frame: &[u8],
    ) -> Result<(), FrameError> {
        w.write_all(frame).await?;
        w.flush().await?;
        Ok(())
    }

    fn truncated(e: std::io::Error) -> FrameError {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            FrameError::Truncated
        } else {
            FrameError::Io(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Hello, Request, RequestBody};

    #[test]
    fn encode_prefixes_the_big_endian_length() {
        let frame = encode(&Hello {
            protocol: 1,
            client: "t".into(),
        })
        .unwrap();
        let len = u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
        assert_eq!(len, frame.len() - HEADER_BYTES);
        let back: Hello = decode(&frame[HEADER_BYTES..]).unwrap();
        assert_eq!(back.client, "t");
    }

    #[test]
    fn oversized_messages_and_headers_are_refused() {
        let big = Request {
            id: 1,
            body: RequestBody::MountChunk {
                target: 1,
                data: vec![0; MAX_FRAME_BYTES],
            },
        };
        assert!(matches!(encode(&big), Err(FrameError::TooLarge { .. })));
        assert!(matches!(
            body_len([0xff; 4]),
            Err(FrameError::TooLarge {
                len: 0xffff_ffff,
                ..
            })
        ));
        assert_eq!(
            body_len((MAX_FRAME_BYTES as u32).to_be_bytes()).unwrap(),
            MAX_FRAME_BYTES
        );
    }

    #[test]
    fn unknown_ops_do_not_decode() {
        let r: Result<Request, _> = decode(br#"{"id":1,"body":{"op":"format_disk"}}"#);
        assert!(matches!(r, Err(FrameError::Json(_))));
    }

    #[cfg(feature = "client")]
    #[tokio::test]
    async fn read_frame_tells_clean_end_from_truncation() {
        let frame = encode(&Hello {
            protocol: 1,
            client: "t".into(),
        })
        .unwrap();
        let mut whole: &[u8] = &frame;
        assert!(read_frame(&mut whole).await.unwrap().is_some());
        assert!(read_frame(&mut whole).await.unwrap().is_none());
        for cut in [2, HEADER_BYTES + 3] {
            let mut part: &[u8] = &frame[..cut];
            assert!(matches!(
                read_frame(&mut part).await,
                Err(FrameError::Truncated)
            ));
        }
        let mut huge: &[u8] = &[0xff, 0xff, 0xff, 0xff, b'{'];
        assert!(matches!(
            read_frame(&mut huge).await,
            Err(FrameError::TooLarge { .. })
        ));
    }
}
