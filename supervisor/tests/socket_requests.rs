//! Requests over one connection: multiplexing, events, cancellation,
//! limits, uploads, and what the client sees when the connection dies.

mod socket_support;

use prims_protocol::client::{Client, ClientError};
use prims_protocol::wire::{ErrorCode, Event, MountSize, Reply, RequestBody, MAX_CHUNK_BYTES};
use socket_support::*;
use std::time::Duration;

const SECOND: Duration = Duration::from_secs(1);

#[tokio::test]
async fn twenty_concurrent_requests_on_one_connection_get_their_own_replies() {
    let server = start().await;
    let client = server.client().await;
    let tasks = (0..20).map(|i| {
        let client = client.clone();
        tokio::spawn(async move {
            if i % 4 == 0 {
                let reply = client.request(RequestBody::Stats).await.unwrap();
                assert!(matches!(reply, Reply::Stats(_)));
                return;
            }
            let code = format!("print({i})");
            let mut events = Vec::new();
            let RequestBody::Run(req) = run("s", &code) else {
                unreachable!()
            };
            let reply = client.run(req, |e| events.push(e)).await.unwrap();
            assert_eq!(reply.stdout, code.as_bytes());
            assert_eq!(events, vec![output(code.as_bytes()); 3]);
        })
    });
    for t in futures::future::join_all(tasks).await {
        t.unwrap();
    }
    assert_eq!(
        server
            .handler
            .stats_calls
            .load(std::sync::atomic::Ordering::SeqCst),
        5
    );
    server.stop().await;
}

#[tokio::test]
async fn events_from_a_std_thread_arrive_before_the_reply() {
    let server = start().await;
    let client = server.client().await;
    let mut call = client.call(run("s", FROM_THREAD)).await.unwrap();
    let mut seen = Vec::new();
    while let Some(e) = call.next_event().await.unwrap() {
        seen.push(e);
    }
    assert_eq!(seen, vec![output(&[0]), output(&[1]), output(&[2])]);
    assert!(matches!(call.finish().await.unwrap(), Reply::Run(_)));
}

#[tokio::test]
async fn server_errors_and_panics_reach_only_their_request() {
    let server = start().await;
    let client = server.client().await;
    let missing = client
        .request(RequestBody::SessionInfo {
            session_id: "x".into(),
            tenant: None,
        })
        .await;
    assert!(matches!(missing, Err(ClientError::Server(ref e)) if e.code == ErrorCode::NotFound));
    let panicked = client.request(run("s", PANIC)).await;
    assert!(matches!(panicked, Err(ClientError::Server(ref e)) if e.code == ErrorCode::Internal));
    assert!(matches!(
        client.request(RequestBody::Stats).await,
        Ok(Reply::Stats(_))
    ));
}

#[tokio::test]
async fn cancel_reaches_the_handler_and_is_acknowledged() {
    let server = start().await;
    let mut cancels = server.watch_cancels();
    let client = server.client().await;
    let mut call = client.call(hang("a")).await.unwrap();
    assert_eq!(call.next_event().await.unwrap(), Some(Event::Started));
    client.cancel(call.id()).await.unwrap();
    let who = tokio::time::timeout(SECOND, cancels.recv()).await.unwrap();
    assert_eq!(who.as_deref(), Some("a"));
    let end = call.finish().await;
    assert!(matches!(end, Err(ClientError::Server(ref e)) if e.code == ErrorCode::Cancelled));

    let unknown = client.cancel(9999).await;
    assert!(matches!(unknown, Err(ClientError::Server(ref e)) if e.code == ErrorCode::NotFound));
}

#[tokio::test]
async fn dropping_an_unfinished_call_cancels_it() {
    let server = start().await;
    let mut cancels = server.watch_cancels();
    let client = server.client().await;
    let mut call = client.call(hang("dropped")).await.unwrap();
    assert_eq!(call.next_event().await.unwrap(), Some(Event::Started));
    drop(call);
    let who = tokio::time::timeout(SECOND, cancels.recv()).await.unwrap();
    assert_eq!(who.as_deref(), Some("dropped"));
}

#[tokio::test]
async fn a_disconnect_cancels_every_request_in_flight() {
    let server = start().await;
    let mut cancels = server.watch_cancels();
    let client = server.client().await;
    let mut calls = Vec::new();
    for s in ["x", "y", "z"] {
        let mut call = client.call(hang(s)).await.unwrap();
        assert_eq!(call.next_event().await.unwrap(), Some(Event::Started));
        calls.push(call);
    }
    // The calls stay alive, so only the disconnect can cancel them.
    drop(client);
    let mut seen = Vec::new();
    for _ in 0..3 {
        let who = tokio::time::timeout(SECOND, cancels.recv()).await.unwrap();
        seen.push(who.unwrap());
    }
    seen.sort();
    assert_eq!(seen, ["x", "y", "z"]);
    drop(calls);
    server.assert_alive().await;
}

#[tokio::test]
async fn requests_beyond_the_per_connection_limit_are_busy() {
    let server = start_with(|c| c.limits.max_requests_per_connection = 2).await;
    let client = server.client().await;
    let mut a = client.call(hang("a")).await.unwrap();
    let mut b = client.call(hang("b")).await.unwrap();
    a.next_event().await.unwrap();
    b.next_event().await.unwrap();
    let busy = client.request(RequestBody::Stats).await;
    assert!(matches!(busy, Err(ClientError::Server(ref e)) if e.code == ErrorCode::Busy));
    // Cancelling is not a request in flight, so it still gets through.
    client.cancel(a.id()).await.unwrap();
    assert!(a.finish().await.is_err());
    assert!(matches!(
        client.request(RequestBody::Stats).await,
        Ok(Reply::Stats(_))
    ));
    // Another connection has its own budget.
    server.assert_alive().await;
}

#[tokio::test]
async fn write_mount_delivers_chunks_in_order_and_completes() {
    let server = start().await;
    let client = server.client().await;
    let data: Vec<u8> = (0..(3 * MAX_CHUNK_BYTES + 12345))
        .map(|i| (i % 251) as u8)
        .collect();
    let mounted = client.write_mount("s", "data.bin", &data).await.unwrap();
    assert_eq!(mounted.path, "data.bin");
    assert_eq!(mounted.bytes, data.len() as u64);
    let empty = client.write_mount("s", "empty", &[]).await.unwrap();
    assert_eq!(empty.bytes, 0);

    let mounts = server.handler.mounts.lock().unwrap();
    let (path, chunks) = &mounts[0];
    assert_eq!(path, "data.bin");
    assert_eq!(chunks.len(), 4);
    assert!(chunks.iter().all(|c| c.len() <= MAX_CHUNK_BYTES));
    assert_eq!(chunks.concat(), data);
    assert_eq!(mounts[1].1.len(), 0);
}

#[tokio::test]
async fn an_open_ended_upload_completes_on_its_end_only() {
    let server = start().await;
    let client = server.client().await;
    let data: Vec<u8> = (0..(2 * MAX_CHUNK_BYTES + 777))
        .map(|i| (i % 253) as u8)
        .collect();
    let max = MountSize::AtMost(10 * MAX_CHUNK_BYTES as u64);
    let mut up = client
        .start_mount("s", None, "open.bin", max)
        .await
        .unwrap();
    up.send(&data[..1000]).await.unwrap();
    up.send(&data[1000..]).await.unwrap();
    let mounted = up.finish().await.unwrap();
    assert_eq!(mounted.bytes, data.len() as u64);

    // Exactly the maximum is fine; a byte more is refused before it is sent.
    let mut full = client
        .start_mount("s", None, "full.bin", MountSize::AtMost(5))
        .await
        .unwrap();
    full.send(b"12345").await.unwrap();
    let over = full.send(b"6").await;
    assert!(matches!(over, Err(ClientError::Usage(_))), "{over:?}");
    assert_eq!(full.finish().await.unwrap().bytes, 5);
    let empty = client
        .start_mount("s", None, "empty", MountSize::AtMost(5))
        .await
        .unwrap();
    assert_eq!(empty.finish().await.unwrap().bytes, 0);

    // Aborted: the handler sees its stream end with the request cancelled,
    // and has answered by the time abort returns.
    let mut cut = client.start_mount("s", None, "cut.bin", max).await.unwrap();
    cut.send(&data[..5000]).await.unwrap();
    cut.abort().await.unwrap();

    let mounts = server.handler.mounts.lock().unwrap();
    let names: Vec<&str> = mounts.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(names, ["open.bin", "full.bin", "empty"]);
    assert_eq!(mounts[0].1.concat(), data);
    assert_eq!(mounts[1].1.concat(), b"12345");
}

#[tokio::test]
async fn uploads_run_alongside_other_requests() {
    let server = start().await;
    let client = server.client().await;
    let data = vec![7u8; 2 * MAX_CHUNK_BYTES];
    let (up, stats) = tokio::join!(
        client.write_mount("s", "big", &data),
        client.request(RequestBody::Stats)
    );
    assert_eq!(up.unwrap().bytes, data.len() as u64);
    assert!(matches!(stats, Ok(Reply::Stats(_))));
}

#[tokio::test]
async fn pending_calls_end_disconnected_when_the_server_goes_away() {
    let server = start().await;
    let client = server.client().await;
    let mut call = client.call(hang("s")).await.unwrap();
    assert_eq!(call.next_event().await.unwrap(), Some(Event::Started));
    let pending = tokio::spawn({
        let client = client.clone();
        async move { client.request(hang("t")).await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    server.stop().await;
    let end = tokio::time::timeout(SECOND, call.finish()).await.unwrap();
    assert!(matches!(end, Err(ClientError::Disconnected)), "{end:?}");
    let other = tokio::time::timeout(SECOND, pending)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(other, Err(ClientError::Disconnected)), "{other:?}");
    assert!(!client.is_connected());
    let after = client.request(RequestBody::Stats).await;
    assert!(matches!(after, Err(ClientError::Disconnected)), "{after:?}");
}

#[tokio::test]
async fn a_server_that_dies_without_a_word_fails_pending_calls() {
    // A bare listener that completes the handshake and then vanishes, as a
    // crashed supervisor would.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fake.sock");
    let listener = tokio::net::UnixListener::bind(&path).unwrap();
    let fake = tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        let (mut s, _) = listener.accept().await.unwrap();
        prims_protocol::frame::read_frame(&mut s).await.unwrap();
        let welcome = prims_protocol::wire::Welcome {
            protocol: prims_protocol::wire::PROTOCOL_VERSION,
            server: "fake".into(),
        };
        s.write_all(&prims_protocol::frame::encode(&welcome).unwrap())
            .await
            .unwrap();
        // Wait for the request, then die.
        prims_protocol::frame::read_frame(&mut s).await.unwrap();
    });
    let client = Client::connect(&path, "test").await.unwrap();
    let end = tokio::time::timeout(SECOND, client.request(run("s", "print(1)")))
        .await
        .unwrap();
    assert!(matches!(end, Err(ClientError::Disconnected)), "{end:?}");
    fake.await.unwrap();
}
