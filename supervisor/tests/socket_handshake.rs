//! The socket file and the handshake.

mod socket_support;

use prims_protocol::client::Client;
use prims_protocol::frame;
use prims_protocol::wire::{
    ErrorCode, Hello, Request, RequestBody, ResponseBody, PROTOCOL_VERSION,
};
use prims_supervisor::server::{serve, ServerError};
use socket_support::*;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn handshake_welcomes_a_current_client() {
    let server = start().await;
    let client = Client::connect(&server.path, "test").await.unwrap();
    assert!(client.server_name().starts_with("prims-supervisor"));
    assert!(client.is_connected());
    server.assert_alive().await;
    server.stop().await;
}

#[tokio::test]
async fn wrong_version_gets_an_error_naming_both_then_close() {
    let server = start().await;
    let mut s = UnixStream::connect(&server.path).await.unwrap();
    let hello = Hello {
        protocol: 99,
        client: "future".into(),
    };
    s.write_all(&frame::encode(&hello).unwrap()).await.unwrap();
    let resp = read_response(&mut s).await;
    assert_eq!(resp.id, 0);
    let ResponseBody::Error(e) = resp.body else {
        panic!("expected an error, got {resp:?}")
    };
    assert_eq!(e.code, ErrorCode::BadRequest);
    assert!(e.message.contains("99") && e.message.contains(&PROTOCOL_VERSION.to_string()));
    assert_closed(&mut s).await;
    server.assert_alive().await;
}

#[tokio::test]
async fn a_request_before_hello_is_refused() {
    let server = start().await;
    let mut s = UnixStream::connect(&server.path).await.unwrap();
    let req = Request {
        id: 1,
        body: RequestBody::Stats,
    };
    s.write_all(&frame::encode(&req).unwrap()).await.unwrap();
    let resp = read_response(&mut s).await;
    assert!(matches!(resp.body, ResponseBody::Error(ref e) if e.code == ErrorCode::BadRequest));
    assert_closed(&mut s).await;
    server.assert_alive().await;
}

#[tokio::test]
async fn a_silent_client_is_dropped_after_the_hello_timeout() {
    let server = start().await;
    let mut s = UnixStream::connect(&server.path).await.unwrap();
    let t = Instant::now();
    assert_closed_within(&mut s, Duration::from_secs(8)).await;
    assert!(t.elapsed() >= Duration::from_secs(4), "closed too early");
    server.assert_alive().await;
}

async fn assert_closed_within(s: &mut UnixStream, limit: Duration) {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 256];
    let n = tokio::time::timeout(limit, s.read(&mut buf))
        .await
        .expect("closed in time");
    assert!(matches!(n, Ok(0) | Err(_)));
}

#[tokio::test]
async fn socket_is_0660_in_the_configured_group_and_removed_on_shutdown() {
    let server = start_with(|c| c.socket_group = Some(65534)).await;
    let meta = std::fs::symlink_metadata(&server.path).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o660);
    assert_eq!(std::os::unix::fs::MetadataExt::gid(&meta), 65534);
    let path = server.path.clone();
    let TestServer {
        dir,
        shutdown,
        task,
        ..
    } = server;
    shutdown.cancel();
    task.await.unwrap().unwrap();
    assert!(!path.exists(), "socket left behind");
    drop(dir);
}

async fn serve_at(path: std::path::PathBuf) -> Result<(), ServerError> {
    let shutdown = CancellationToken::new();
    let handler = Arc::new(TestHandler::default());
    let stop = shutdown.clone();
    let probe = path.clone();
    tokio::spawn(async move {
        // Stop the server once it is up, so that a successful bind returns.
        for _ in 0..500 {
            if Client::connect(&probe, "probe").await.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        stop.cancel();
    });
    serve(config(path), handler, shutdown).await
}

#[tokio::test]
async fn a_stale_socket_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.sock");
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(path.exists());
    serve_at(path).await.unwrap();
}

#[tokio::test]
async fn a_live_socket_is_not_stolen() {
    let server = start().await;
    let err = serve_at(server.path.clone()).await.unwrap_err();
    assert!(matches!(err, ServerError::InUse(_)), "{err}");
    server.assert_alive().await;
}

#[tokio::test]
async fn a_symlink_or_a_file_at_the_socket_path_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("target");
    std::fs::write(&target, b"keep me").unwrap();
    let link = dir.path().join("link.sock");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let err = serve_at(link.clone()).await.unwrap_err();
    assert!(matches!(err, ServerError::Symlink(_)), "{err}");
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());

    let err = serve_at(target.clone()).await.unwrap_err();
    assert!(matches!(err, ServerError::NotASocket(_)), "{err}");
    assert_eq!(std::fs::read(&target).unwrap(), b"keep me");

    let dangling = dir.path().join("dangling.sock");
    std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
    let err = serve_at(dangling).await.unwrap_err();
    assert!(matches!(err, ServerError::Symlink(_)), "{err}");
    assert!(!dir.path().join("nowhere").exists());
}

#[tokio::test]
async fn connections_beyond_the_limit_are_refused_until_one_closes() {
    let server = start_with(|c| c.limits.max_connections = 2).await;
    let a = server.client().await;
    let _b = server.client().await;
    let third = Client::connect(&server.path, "third").await;
    assert!(third.is_err(), "a third connection was accepted");
    drop(a);
    // The server frees the slot once it notices the close.
    let mut ok = false;
    for _ in 0..100 {
        if Client::connect(&server.path, "later").await.is_ok() {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(ok, "a slot was not freed");
}
