//! Frames as bytes: encoding, the header check, decoding, splitting a buffer.

use super::error::FrameError;
use crate::wire::MAX_FRAME_BYTES;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Bytes in the length prefix.
pub const HEADER_BYTES: usize = 4;

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

/// The body length announced by a header, refused when over `max` (itself
/// capped at [`MAX_FRAME_BYTES`]).
pub fn body_len(header: [u8; HEADER_BYTES], max: usize) -> Result<usize, FrameError> {
    let max = max.min(MAX_FRAME_BYTES);
    let len = u32::from_be_bytes(header) as usize;
    if len > max {
        return Err(FrameError::TooLarge { len, max });
    }
    Ok(len)
}

/// Parse a frame body (without its header).
pub fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, FrameError> {
    Ok(serde_json::from_slice(body)?)
}

/// The first whole frame in `bytes`: its body and the bytes after it, or
/// `None` while that frame is incomplete. Allocates nothing (a forked child
/// may use it).
pub fn split_frame(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let (header, rest) = bytes.split_first_chunk::<HEADER_BYTES>()?;
    let len = u32::from_be_bytes(*header) as usize;
    rest.split_at_checked(len)
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
            body_len([0xff; 4], MAX_FRAME_BYTES),
            Err(FrameError::TooLarge {
                len: 0xffff_ffff,
                ..
            })
        ));
        assert_eq!(
            body_len((MAX_FRAME_BYTES as u32).to_be_bytes(), MAX_FRAME_BYTES).unwrap(),
            MAX_FRAME_BYTES
        );
        assert!(matches!(
            body_len(7u32.to_be_bytes(), 3),
            Err(FrameError::TooLarge { len: 7, max: 3 })
        ));
        assert!(matches!(
            body_len([0xff; 4], usize::MAX),
            Err(FrameError::TooLarge {
                max: MAX_FRAME_BYTES,
                ..
            })
        ));
    }

    #[test]
    fn unknown_ops_do_not_decode() {
        let r: Result<Request, _> = decode(br#"{"id":1,"body":{"op":"format_disk"}}"#);
        assert!(matches!(r, Err(FrameError::Json(_))));
    }

    #[test]
    fn split_frame_takes_whole_frames_only() {
        let mut bytes = encode(&Hello {
            protocol: 1,
            client: "a".into(),
        })
        .unwrap();
        let first_len = bytes.len();
        bytes.extend_from_slice(&[0, 0, 0, 0]);
        bytes.extend_from_slice(&[0, 0, 0, 9, b'{']);
        let (body, rest) = split_frame(&bytes).unwrap();
        assert_eq!(body, &bytes[HEADER_BYTES..first_len]);
        let (empty, rest) = split_frame(rest).unwrap();
        assert_eq!((empty, rest), (&[][..], &[0, 0, 0, 9, b'{'][..]));
        assert_eq!(split_frame(rest), None, "9 bytes announced, 1 there");
        for cut in 0..first_len {
            assert_eq!(split_frame(&bytes[..cut]), None, "cut at {cut}");
        }
    }
}
