//! What a peer may hold on the socket: a frame that started must finish
//! within its deadline (idle time between frames is free), the hello must
//! come in time, and big partial frames share one byte budget that small
//! requests never wait for.

mod socket_support;

use prims_protocol::frame;
use prims_protocol::wire::{Reply, Request, RequestBody, ResponseBody};
use prims_tests::peer::wait_until_peer_read_all;
use socket_support::*;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;

/// The next response on a read half, within 5 s.
async fn read_frame(rd: &mut tokio::net::unix::OwnedReadHalf) -> prims_protocol::wire::Response {
    let body = tokio::time::timeout(Duration::from_secs(5), frame::read_frame(rd))
        .await
        .expect("a response in time")
        .unwrap()
        .expect("a response, not the end");
    frame::decode(&body).unwrap()
}

const KIB: usize = 1024;

/// A header announcing `len` bytes, then `sent` of them.
fn partial_frame(len: usize, sent: usize) -> Vec<u8> {
    let mut v = (len as u32).to_be_bytes().to_vec();
    v.resize(4 + sent, b' ');
    v
}

/// Time until the server closes `s`, which must happen within `limit`.
async fn closed_after(s: &mut UnixStream, since: Instant, limit: Duration) -> Duration {
    tokio::time::timeout(limit, assert_closed_eventually(s))
        .await
        .unwrap_or_else(|_| panic!("the server kept the connection open for {limit:?}"));
    since.elapsed()
}

async fn assert_closed_eventually(s: &mut UnixStream) {
    use tokio::io::AsyncReadExt;
    let mut buf = vec![0u8; 64 * KIB];
    loop {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

#[tokio::test]
async fn a_stalled_frame_is_closed_at_its_deadline_and_an_idle_connection_is_not() {
    let deadline = Duration::from_secs(2);
    let server = start_with(|c| c.limits.frame_deadline = deadline).await;
    let idle = server.client().await;
    let mut body = raw_hello(&server).await;
    let mut header = raw_hello(&server).await;
    let t = Instant::now();
    body.write_all(&partial_frame(1 << 20, 10)).await.unwrap();
    header.write_all(&[0, 0]).await.unwrap();
    for s in [&mut body, &mut header] {
        let after = closed_after(s, t, deadline * 10).await;
        // The clock starts when the server reads the first byte, after we sent it.
        assert!(
            after >= deadline,
            "closed after {after:?}, before the deadline"
        );
    }
    // `idle` has now been idle between frames for longer than a frame may
    // take: still served.
    assert!(t.elapsed() >= deadline);
    assert!(matches!(
        idle.request(RequestBody::Stats).await,
        Ok(Reply::Stats(_))
    ));
    server.assert_alive().await;
}

#[tokio::test]
async fn a_half_sent_hello_is_closed_at_the_hello_deadline() {
    let deadline = Duration::from_secs(1);
    let server = start_with(|c| c.limits.hello_deadline = deadline).await;
    let mut s = UnixStream::connect(&server.path).await.unwrap();
    let t = Instant::now();
    s.write_all(&partial_frame(60, 5)).await.unwrap();
    let after = closed_after(&mut s, t, deadline * 20).await;
    assert!(after >= deadline, "closed after {after:?}");
    server.assert_alive().await;
}

#[tokio::test]
async fn a_hello_bigger_than_a_hello_is_refused_from_its_header() {
    let server = start().await;
    let mut s = UnixStream::connect(&server.path).await.unwrap();
    // The write side stays open: the header alone must be enough.
    s.write_all(&partial_frame(64 * KIB, 0)).await.unwrap();
    assert_closed(&mut s).await;
    server.assert_alive().await;
}

/// A `Run` request whose frame is about `bytes` long; the test handler
/// answers with its code as stdout.
fn big_run(id: u64, bytes: usize) -> Vec<u8> {
    let code = "x".repeat(bytes);
    frame::encode(&Request {
        id,
        body: run("s", &code),
    })
    .unwrap()
}

#[tokio::test]
async fn big_partial_frames_share_one_budget_that_small_requests_never_wait_for() {
    let allowance = 64 * KIB;
    let server = start_with(|c| {
        c.limits.frame_allowance = allowance;
        c.limits.partial_frame_budget = 1024 * KIB;
        // Long: the test, not the deadline, decides when the hog lets go.
        c.limits.frame_deadline = Duration::from_secs(120);
    })
    .await;
    // Once the server has read all that the hog sent, the hog's buffer has
    // doubled to its whole 1 MiB frame: all of the budget (and its allowance).
    let mut hog = raw_hello(&server).await;
    hog.write_all(&partial_frame(1024 * KIB, 1024 * KIB - 1))
        .await
        .unwrap();
    wait_until_peer_read_all(&hog).await;
    // A complete 300 KiB request on another connection needs budget the hog holds.
    let (mut waiter, mut send) = raw_hello(&server).await.into_split();
    let request = big_run(1, 300 * KIB);
    // More than a socket buffer holds: the write ends only once the server reads.
    let sending = tokio::spawn(async move { send.write_all(&request).await.map(|_| send) });
    let early = tokio::time::timeout(Duration::from_millis(500), read_frame(&mut waiter));
    assert!(
        early.await.is_err(),
        "a frame was read past the budget the hog holds"
    );
    // Small requests fit in their allowance and are served meanwhile.
    for _ in 0..3 {
        server.assert_alive().await;
    }
    // The hog goes away; its budget is released and the waiting frame completes.
    drop(hog);
    let _send = sending.await.unwrap().unwrap();
    let resp = read_frame(&mut waiter).await;
    assert_eq!(resp.id, 1);
    assert!(
        matches!(resp.body, ResponseBody::Event(_)),
        "{:?}",
        resp.body
    );
    server.assert_alive().await;
}

#[tokio::test]
async fn a_frame_bigger_than_the_whole_budget_closes_its_connection() {
    let server = start_with(|c| {
        c.limits.frame_allowance = 64 * KIB;
        c.limits.partial_frame_budget = 256 * KIB;
    })
    .await;
    let bystander = server.client().await;
    let mut s = raw_hello(&server).await;
    // The server hangs up partway through; the write may fail.
    let _ = s.write_all(&partial_frame(1024 * KIB, 1024 * KIB)).await;
    assert_closed(&mut s).await;
    assert!(matches!(
        bystander.request(RequestBody::Stats).await,
        Ok(Reply::Stats(_))
    ));
}
