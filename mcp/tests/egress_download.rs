//! Downloads from real loopback HTTP servers: exact bytes, the size cap while
//! streaming and from Content-Length, redirects and timeouts.

mod egress_support;

use egress_support::{init_tracing, loopback_only, with_timeout, Reply, Server};
use prims_mcp::egress::{Egress, EgressError, MAX_REDIRECTS};
use std::time::{Duration, Instant};

fn data(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
}

#[tokio::test]
async fn a_file_arrives_byte_exact() {
    init_tracing();
    let body = data(700 * 1024);
    let served = body.clone();
    let server = Server::start("127.0.0.1:0", move |_| {
        Reply::Full(
            200,
            vec![("Content-Type", "text/csv".into())],
            served.clone(),
        )
    })
    .await;
    let egress = Egress::new(&loopback_only()).unwrap();
    let mut dl = egress.download(&server.url("/data.csv")).await.unwrap();
    assert_eq!(dl.content_length, Some(body.len() as u64));
    assert_eq!(dl.content_type.as_deref(), Some("text/csv"));
    assert_eq!(dl.url, server.url("/data.csv"));
    let mut got = Vec::new();
    let mut chunks = 0;
    while let Some(chunk) = dl.next_chunk().await.unwrap() {
        got.extend_from_slice(&chunk);
        chunks += 1;
    }
    assert!(got == body, "body differs");
    assert!(chunks > 1, "the body should arrive in pieces");
    assert_eq!(dl.received(), body.len() as u64);
    let req = &server.requests()[0];
    assert_eq!(
        (req.method.as_str(), req.path.as_str()),
        ("GET", "/data.csv")
    );
}

#[tokio::test]
async fn an_endless_body_is_cut_off_while_streaming() {
    init_tracing();
    let server = Server::start("127.0.0.1:0", |_| Reply::Endless).await;
    let egress = Egress::new(&loopback_only()).unwrap();
    let mut dl = egress.download(&server.url("/forever")).await.unwrap();
    assert_eq!(dl.content_length, None);
    let err = loop {
        match dl.next_chunk().await {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("an endless body ended"),
            Err(e) => break e,
        }
    };
    assert!(
        matches!(err, EgressError::TooLarge { limit: 1_048_576 }),
        "{err:?}"
    );
    assert!(
        dl.received() <= 1_048_576 + 64 * 1024,
        "read {}",
        dl.received()
    );
    assert!(matches!(dl.next_chunk().await, Err(EgressError::Aborted)));
    drop(dl);
    // The connection is gone, so the server stops soon after the limit.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let sent = server
        .endless_sent
        .load(std::sync::atomic::Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let later = server
        .endless_sent
        .load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(sent, later, "the server is still sending");
    assert!(sent < 16 * 1_048_576, "server sent {sent} bytes");
}

#[tokio::test]
async fn a_too_large_content_length_is_refused_before_the_body() {
    init_tracing();
    let server = Server::start("127.0.0.1:0", |_| Reply::Claims(10 * 1_048_576)).await;
    let egress = Egress::new(&loopback_only()).unwrap();
    let started = Instant::now();
    let err = egress.download(&server.url("/big")).await.unwrap_err();
    assert!(
        matches!(err, EgressError::TooLarge { limit: 1_048_576 }),
        "{err:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "waited for the body"
    );
    assert!(err.to_string().contains("1048576 bytes"), "{err}");
}

/// `/hop/N` redirects to `/hop/N-1`; `/hop/0` is the file.
async fn chain_server() -> Server {
    Server::start("127.0.0.1:0", |req| {
        let n: u32 = req.path.trim_start_matches("/hop/").parse().unwrap_or(0);
        match n {
            0 => Reply::Full(200, vec![], b"arrived".to_vec()),
            // Relative and absolute Locations, and every redirect status.
            n if n % 2 == 0 => {
                let status = [301, 302, 303][(n as usize / 2) % 3];
                Reply::Redirect(status, format!("/hop/{}", n - 1))
            }
            n => Reply::Redirect(307 + (n % 2) as u16, format!("../hop/{}", n - 1)),
        }
    })
    .await
}

#[tokio::test]
async fn five_redirects_are_followed_and_six_are_too_many() {
    init_tracing();
    let server = chain_server().await;
    let egress = Egress::new(&loopback_only()).unwrap();
    let dl = egress.download(&server.url("/hop/5")).await.unwrap();
    assert_eq!(dl.url, server.url("/hop/0"));
    assert_eq!(dl.bytes().await.unwrap(), b"arrived");

    let before = server.requests().len();
    let err = egress.download(&server.url("/hop/6")).await.unwrap_err();
    assert!(
        matches!(err, EgressError::TooManyRedirects { max: 5 }),
        "{err:?}"
    );
    assert_eq!(server.requests().len() - before, MAX_REDIRECTS + 1);
}

#[tokio::test]
async fn a_redirect_to_a_blocked_address_is_refused() {
    init_tracing();
    // Something really listens on 127.0.0.2, which the policy does not allow.
    let other = Server::start("127.0.0.2:0", |_| {
        Reply::Full(200, vec![], b"secret".to_vec())
    })
    .await;
    let targets = [
        other.url("/"),
        "http://169.254.169.254/latest/meta-data/".to_string(),
        "http://metadata.google.internal/computeMetadata/v1/".to_string(),
        "http://[::ffff:127.0.0.2]:1/".to_string(),
    ];
    for target in targets {
        let t = target.clone();
        let server = Server::start("127.0.0.1:0", move |_| Reply::Redirect(302, t.clone())).await;
        let egress = Egress::new(&loopback_only()).unwrap();
        let err = egress.download(&server.url("/go")).await.unwrap_err();
        assert!(
            matches!(err, EgressError::Blocked { .. }),
            "{target}: {err:?}"
        );
        assert!(err.to_string().contains("egress.allow"), "{err}");
    }
    assert_eq!(other.connection_count(), 0);

    let server = Server::start("127.0.0.1:0", |_| {
        Reply::Redirect(302, "file:///etc/passwd".into())
    })
    .await;
    let egress = Egress::new(&loopback_only()).unwrap();
    let err = egress.download(&server.url("/go")).await.unwrap_err();
    assert!(
        matches!(err, EgressError::SchemeNotAllowed { .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_stalled_server_times_out() {
    init_tracing();
    let egress = Egress::new(&with_timeout(loopback_only(), 500)).unwrap();

    let silent = Server::start("127.0.0.1:0", |_| Reply::Stall).await;
    let started = Instant::now();
    let err = egress.download(&silent.url("/")).await.unwrap_err();
    assert!(matches!(err, EgressError::Timeout { .. }), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(3));

    // Headers, then a body that stops halfway.
    let halfway = Server::start("127.0.0.1:0", |_| Reply::Claims(1000)).await;
    let started = Instant::now();
    let mut dl = egress.download(&halfway.url("/")).await.unwrap();
    let err = loop {
        match dl.next_chunk().await {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("a truncated body ended cleanly"),
            Err(e) => break e,
        }
    };
    assert!(matches!(err, EgressError::Timeout { .. }), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn an_error_status_is_reported() {
    init_tracing();
    let server = Server::start("127.0.0.1:0", |_| {
        Reply::Full(404, vec![], b"nope".to_vec())
    })
    .await;
    let egress = Egress::new(&loopback_only()).unwrap();
    let err = egress.download(&server.url("/missing")).await.unwrap_err();
    assert!(
        matches!(err, EgressError::DownloadStatus { status: 404 }),
        "{err:?}"
    );
    assert_eq!(err.to_string(), "Download failed with HTTP 404");
}
