//! Malformed input closes only the offending connection; the daemon and its
//! other connections carry on.

mod socket_support;

use prims_protocol::frame;
use prims_protocol::wire::{ErrorCode, MountSize, Request, RequestBody, ResponseBody};
use socket_support::*;
use tokio::io::AsyncWriteExt;

/// Send `bytes` after the handshake; the server must close this connection
/// while a bystander connection and new connections keep working.
async fn closes_only_this_connection(bytes: &[u8], then_eof: bool) {
    let server = start().await;
    let bystander = server.client().await;
    let mut s = raw_hello(&server).await;
    s.write_all(bytes).await.unwrap();
    if then_eof {
        s.shutdown().await.unwrap();
    }
    assert_closed(&mut s).await;
    let reply = bystander.request(RequestBody::Stats).await.unwrap();
    assert!(matches!(reply, prims_protocol::wire::Reply::Stats(_)));
    server.assert_alive().await;
    server.stop().await;
}

fn framed(body: &[u8]) -> Vec<u8> {
    let mut v = (body.len() as u32).to_be_bytes().to_vec();
    v.extend_from_slice(body);
    v
}

#[tokio::test]
async fn truncated_frame() {
    let mut bytes = 100u32.to_be_bytes().to_vec();
    bytes.extend_from_slice(br#"{"id":1,"#);
    closes_only_this_connection(&bytes, true).await;
}

#[tokio::test]
async fn truncated_header() {
    closes_only_this_connection(&[0, 0], true).await;
}

#[tokio::test]
async fn oversized_length_header_closes_without_waiting_for_the_body() {
    // The write side stays open: the server must act on the header alone.
    closes_only_this_connection(&[0xff, 0xff, 0xff, 0xff], false).await;
    let just_over = (prims_protocol::wire::MAX_FRAME_BYTES as u32 + 1).to_be_bytes();
    closes_only_this_connection(&just_over, false).await;
}

#[tokio::test]
async fn garbage_json() {
    closes_only_this_connection(&framed(b"{not json at all"), false).await;
    closes_only_this_connection(&framed(b"\xff\xfe\x00binary"), false).await;
    closes_only_this_connection(&framed(b""), false).await;
}

#[tokio::test]
async fn wrong_shape_and_unknown_op() {
    closes_only_this_connection(&framed(br#"{"id":1,"body":{"op":"format_disk"}}"#), false).await;
    closes_only_this_connection(
        &framed(br#"{"id":1,"body":{"op":"stats"},"extra":1}"#),
        false,
    )
    .await;
    closes_only_this_connection(&framed(br#"{"id":-1,"body":{"op":"stats"}}"#), false).await;
    closes_only_this_connection(&framed(br#"[1,2,3]"#), false).await;
}

#[tokio::test]
async fn chunk_for_an_unknown_target() {
    let req = Request {
        id: 7,
        body: RequestBody::MountChunk {
            target: 42,
            data: vec![1, 2, 3],
        },
    };
    closes_only_this_connection(&frame::encode(&req).unwrap(), false).await;
}

#[tokio::test]
async fn chunk_for_a_request_that_is_not_an_upload() {
    let mut bytes = frame::encode(&Request {
        id: 1,
        body: hang("s"),
    })
    .unwrap();
    let chunk = Request {
        id: 1,
        body: RequestBody::MountChunk {
            target: 1,
            data: vec![0],
        },
    };
    bytes.extend(frame::encode(&chunk).unwrap());
    closes_only_this_connection(&bytes, false).await;
}

#[tokio::test]
async fn chunks_beyond_the_announced_size() {
    let mount = Request {
        id: 1,
        body: RequestBody::WriteMount {
            session_id: "s".into(),
            tenant: None,
            path: "f".into(),
            size: MountSize::Exact(2),
        },
    };
    let chunk = Request {
        id: 1,
        body: RequestBody::MountChunk {
            target: 1,
            data: vec![0; 3],
        },
    };
    let mut bytes = frame::encode(&mount).unwrap();
    bytes.extend(frame::encode(&chunk).unwrap());
    closes_only_this_connection(&bytes, false).await;
}

fn upload(id: u64, session: &str, size: MountSize) -> Vec<u8> {
    let body = RequestBody::WriteMount {
        session_id: session.into(),
        tenant: None,
        path: "f".into(),
        size,
    };
    frame::encode(&Request { id, body }).unwrap()
}

fn chunk(target: u64, len: usize) -> Vec<u8> {
    let body = RequestBody::MountChunk {
        target,
        data: vec![7; len],
    };
    frame::encode(&Request { id: target, body }).unwrap()
}

fn end(target: u64) -> Vec<u8> {
    let body = RequestBody::MountEnd { target };
    frame::encode(&Request { id: target, body }).unwrap()
}

#[tokio::test]
async fn chunks_beyond_an_open_ended_uploads_maximum() {
    let bytes = [upload(1, "s", MountSize::AtMost(2)), chunk(1, 3)].concat();
    closes_only_this_connection(&bytes, false).await;
}

#[tokio::test]
async fn a_chunk_after_mount_end() {
    let at_most = MountSize::AtMost(10);
    let bytes = [upload(1, "s", at_most), chunk(1, 2), end(1), chunk(1, 1)].concat();
    closes_only_this_connection(&bytes, false).await;
}

#[tokio::test]
async fn mount_end_for_an_exact_upload_a_run_or_nothing() {
    let exact = [upload(1, "s", MountSize::Exact(2)), end(1)].concat();
    closes_only_this_connection(&exact, false).await;
    let run = frame::encode(&Request {
        id: 1,
        body: hang("s"),
    })
    .unwrap();
    closes_only_this_connection(&[run, end(1)].concat(), false).await;
    closes_only_this_connection(&end(42), false).await;
}

#[tokio::test]
async fn late_chunks_and_end_of_a_failed_open_ended_upload_are_dropped() {
    let server = start().await;
    let mut s = raw_hello(&server).await;
    s.write_all(&upload(1, REFUSE, MountSize::AtMost(100)))
        .await
        .unwrap();
    let refused = read_response(&mut s).await;
    assert_eq!(refused.id, 1);
    assert!(matches!(refused.body, ResponseBody::Error(ref e) if e.code == ErrorCode::Quota));
    // Already on the wire when the refusal came: not a protocol error.
    s.write_all(&[chunk(1, 60), chunk(1, 40), end(1)].concat())
        .await
        .unwrap();
    let stats = frame::encode(&Request {
        id: 2,
        body: RequestBody::Stats,
    })
    .unwrap();
    s.write_all(&stats).await.unwrap();
    let r = read_response(&mut s).await;
    assert_eq!(r.id, 2);
    assert!(matches!(
        r.body,
        ResponseBody::Reply(prims_protocol::wire::Reply::Stats(_))
    ));
    // The end closed the upload for good: more is a protocol error.
    s.write_all(&chunk(1, 1)).await.unwrap();
    assert_closed(&mut s).await;
    server.stop().await;
}

#[tokio::test]
async fn duplicate_and_reserved_ids_are_refused_but_not_fatal() {
    let server = start().await;
    let mut s = raw_hello(&server).await;
    let send = |id, body| frame::encode(&Request { id, body }).unwrap();
    s.write_all(&send(5, hang("s"))).await.unwrap();
    let started = read_response(&mut s).await;
    assert_eq!(started.id, 5);
    s.write_all(&send(5, RequestBody::Stats)).await.unwrap();
    let dup = read_response(&mut s).await;
    assert_eq!(dup.id, 5);
    assert!(matches!(dup.body, ResponseBody::Error(ref e) if e.code == ErrorCode::BadRequest));

    s.write_all(&send(0, RequestBody::Stats)).await.unwrap();
    let zero = read_response(&mut s).await;
    assert!(matches!(zero.body, ResponseBody::Error(ref e) if e.code == ErrorCode::BadRequest));

    // The connection still works, and the hung request can still be cancelled.
    s.write_all(&send(6, RequestBody::Cancel { target: 5 }))
        .await
        .unwrap();
    let mut seen = Vec::new();
    for _ in 0..2 {
        let r = read_response(&mut s).await;
        seen.push((r.id, r.body));
    }
    seen.sort_by_key(|(id, _)| *id);
    assert!(matches!(seen[0].1, ResponseBody::Error(ref e) if e.code == ErrorCode::Cancelled));
    assert!(matches!(
        seen[1].1,
        ResponseBody::Reply(prims_protocol::wire::Reply::Cancelled)
    ));
    server.stop().await;
}
