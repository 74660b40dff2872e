//! The proxy on real loopback sockets: a client speaking HTTP and CONNECT
//! to it, and a real upstream server behind it.

use prims_egress::decide::Rules;
use prims_egress::resolve::Resolver;
use prims_egress::run::{Budget, Current, Run};
use prims_egress::serve::{serve, Edge};
use prims_policy::network::{parse_allow_entry, AllowList};
use prims_tests::http::{self, HttpServer};
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// An upstream on loopback that answers every request with `body_len` bytes.
fn upstream(body_len: usize) -> HttpServer {
    HttpServer::loopback(move |_, mut c| async move {
        let _ = http::reply(&mut c, "200 OK", &vec![b'x'; body_len]).await;
    })
}

struct Proxy {
    addr: SocketAddr,
    current: Current,
    stop: CancellationToken,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn proxy(entries: &[String], budget: Budget, names: &[String]) -> Proxy {
    let e: Vec<_> = entries
        .iter()
        .map(|s| parse_allow_entry(s).unwrap())
        .collect();
    let rules = Rules {
        list: AllowList::new(&e, &[80, 443]),
        trust_named_addresses: false,
        // These tests tunnel: inspection has its own (tests/inspect.rs).
        ..Rules::default()
    };
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let current = Current::new(Run::new(rules, budget));
    let stop = CancellationToken::new();
    let resolver = Resolver::fixed(names).unwrap();
    let edge = Edge {
        resolver,
        inspection: Default::default(),
    };
    tokio::spawn(serve(l, current.clone(), edge, stop.clone()));
    Proxy {
        addr,
        current,
        stop,
    }
}

const ROOMY: Budget = Budget {
    max_bytes: 1 << 30,
    max_connections: 100,
};

/// Sends `request` to the proxy and returns all it answered.
async fn ask(proxy: SocketAddr, request: &str) -> String {
    let mut c = TcpStream::connect(proxy).await.unwrap();
    c.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out).await;
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn an_allowed_address_is_relayed_and_counted() {
    let server = upstream(1000);
    let up = server.addr;
    let p = proxy(&[format!("127.0.0.1:{}", up.port())], ROOMY, &[]).await;
    let got = ask(
        p.addr,
        &format!("GET http://{up}/x HTTP/1.1\r\nHost: {up}\r\n\r\n"),
    )
    .await;
    assert!(got.starts_with("HTTP/1.1 200 OK"), "{got}");
    assert!(got.ends_with(&"x".repeat(1000)));
    let r = p.current.get().log.snapshot();
    assert_eq!(r.allowed.len(), 1);
    assert_eq!(
        (r.allowed[0].host.as_str(), r.allowed[0].port),
        ("127.0.0.1", up.port())
    );
    assert!(r.allowed[0].bytes > 1000, "{r:?}");
    assert!(r.denied.is_empty());
}

#[tokio::test]
async fn a_name_that_resolves_to_loopback_is_refused_unless_its_address_is_named() {
    let server = upstream(10);
    let up = server.addr;
    let name = "files.test.example=127.0.0.1".to_string();
    let p = proxy(
        &["files.test.example".to_string()],
        ROOMY,
        std::slice::from_ref(&name),
    )
    .await;
    let port = up.port();
    let got = ask(
        p.addr,
        &format!("CONNECT files.test.example:{port} HTTP/1.1\r\n\r\n"),
    )
    .await;
    assert!(got.starts_with("HTTP/1.1 403"), "{got}");
    let got = ask(p.addr, "CONNECT files.test.example:443 HTTP/1.1\r\n\r\n").await;
    assert!(got.contains("127.0.0.1 (loopback address)"), "{got}");
    let r = p.current.get().log.snapshot();
    assert_eq!(
        r.denied[0].reason,
        format!("port {port} is not allowed for files.test.example (allowed: 80, 443)")
    );
    assert!(
        r.denied[1].reason.contains("not the public internet"),
        "{r:?}"
    );

    let p = proxy(
        &[
            format!("files.test.example:{port}"),
            format!("127.0.0.1:{port}"),
        ],
        ROOMY,
        &[name],
    )
    .await;
    let mut c = TcpStream::connect(p.addr).await.unwrap();
    c.write_all(format!("CONNECT files.test.example:{port} HTTP/1.1\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut head = [0u8; 39];
    c.read_exact(&mut head).await.unwrap();
    assert_eq!(&head, b"HTTP/1.1 200 Connection established\r\n\r\n");
    c.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
    let mut rest = String::new();
    c.read_to_string(&mut rest).await.unwrap();
    assert!(
        rest.starts_with("HTTP/1.1 200 OK") && rest.ends_with("xxxxxxxxxx"),
        "{rest}"
    );
}

#[tokio::test]
async fn max_bytes_cuts_a_large_download() {
    let server = upstream(4 << 20);
    let up = server.addr;
    let budget = Budget {
        max_bytes: 1 << 20,
        max_connections: 100,
    };
    let p = proxy(&[format!("127.0.0.1:{}", up.port())], budget, &[]).await;
    let got = ask(
        p.addr,
        &format!("GET http://{up}/big HTTP/1.1\r\nHost: {up}\r\n\r\n"),
    )
    .await;
    assert!(got.len() <= 1 << 20, "{} bytes came through", got.len());
    let run = p.current.get();
    let r = run.log.snapshot();
    assert!(
        r.denied.iter().any(|d| d.reason.starts_with("cut:")),
        "{r:?}"
    );
    // Nothing more once the budget is spent.
    let again = ask(p.addr, &format!("GET http://{up}/big HTTP/1.1\r\n\r\n")).await;
    assert!(again.starts_with("HTTP/1.1 403"), "{again}");
}

#[tokio::test]
async fn max_connections_refuses_the_one_past_it() {
    let server = upstream(1);
    let up = server.addr;
    let budget = Budget {
        max_bytes: 1 << 30,
        max_connections: 2,
    };
    let p = proxy(&[format!("127.0.0.1:{}", up.port())], budget, &[]).await;
    let get = format!("GET http://{up}/ HTTP/1.1\r\n\r\n");
    for _ in 0..2 {
        assert!(ask(p.addr, &get).await.starts_with("HTTP/1.1 200"));
    }
    let third = ask(p.addr, &get).await;
    assert!(
        third.starts_with("HTTP/1.1 403") && third.contains("max_connections"),
        "{third}"
    );
}

#[tokio::test]
async fn a_new_run_gets_its_own_rules_and_record() {
    let server = upstream(1);
    let up = server.addr;
    let p = proxy(&[format!("127.0.0.1:{}", up.port())], ROOMY, &[]).await;
    let get = format!("GET http://{up}/ HTTP/1.1\r\n\r\n");
    assert!(ask(p.addr, &get).await.starts_with("HTTP/1.1 200"));
    let old = p.current.replace(Run::new(Rules::default(), ROOMY));
    assert!(ask(p.addr, &get).await.starts_with("HTTP/1.1 403"));
    assert_eq!(old.log.snapshot().allowed.len(), 1);
    let now = p.current.get().log.snapshot();
    assert_eq!((now.allowed.len(), now.denied.len()), (0, 1));
}

/// A keep-alive client cannot send a second request, for another host,
/// down the connection the proxy opened for the first: the forwarded
/// request says `Connection: close`, so the upstream answers once.
#[tokio::test]
async fn plain_http_is_one_request_per_connection() {
    // An upstream that keeps connections open unless told to close, and
    // answers each request with the head it got.
    let (heads_tx, mut heads) = tokio::sync::mpsc::unbounded_channel::<String>();
    let server = HttpServer::loopback(move |first, mut c| {
        let heads_tx = heads_tx.clone();
        async move {
            // What the server read for the first head, then the rest.
            let mut seen = [first.head.as_bytes(), &first.rest].concat();
            let mut buf = vec![0u8; 4096];
            loop {
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match c.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let end = seen.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                let head = String::from_utf8_lossy(&seen[..end]).into_owned();
                seen.drain(..end);
                let _ = heads_tx.send(head.clone());
                let close = head.to_ascii_lowercase().contains("connection: close");
                let reply = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{head}",
                    head.len()
                );
                if c.write_all(reply.as_bytes()).await.is_err() || close {
                    return;
                }
            }
        }
    });
    let up = server.addr;
    let p = proxy(&[format!("127.0.0.1:{}", up.port())], ROOMY, &[]).await;
    let mut c = TcpStream::connect(p.addr).await.unwrap();
    c.write_all(
        format!("GET http://{up}/a HTTP/1.1\r\nHost: {up}\r\nConnection: keep-alive\r\nProxy-Connection: keep-alive\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut first = Vec::new();
    c.read_to_end(&mut first).await.unwrap();
    let first = String::from_utf8_lossy(&first);
    assert!(first.starts_with("HTTP/1.1 200 OK"), "{first}");
    let head = heads.recv().await.unwrap();
    assert_eq!(
        head,
        format!("GET /a HTTP/1.1\r\nHost: {up}\r\nConnection: close\r\n\r\n")
    );
    // The proxy closed the client's side too: a second request has nowhere to go.
    let _ = c
        .write_all(b"GET http://evil.example/b HTTP/1.1\r\nHost: evil.example\r\n\r\n")
        .await;
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(
        heads.try_recv().is_err(),
        "the upstream got a second request"
    );
}

/// A request whose Host names another virtual host than its target is
/// answered 400 with why, recorded against the target, and the upstream
/// never hears of it; the same request with a matching Host goes through.
#[tokio::test]
async fn a_host_header_for_another_target_is_refused_and_recorded() {
    let server = HttpServer::loopback(|_, mut c| async move {
        let _ = http::reply(&mut c, "200 OK", b"ok").await;
    });
    let up = server.addr;
    let p = proxy(&[format!("127.0.0.1:{}", up.port())], ROOMY, &[]).await;
    let got = ask(
        p.addr,
        &format!("GET http://{up}/ HTTP/1.1\r\nHost: internal.example\r\n\r\n"),
    )
    .await;
    let why = format!(
        "the Host header names \"internal.example\", not the target {up} (a proxied request's Host must name its target)"
    );
    assert!(got.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{got}");
    assert!(
        got.ends_with(&format!("\r\n\r\nprims egress: {why}")),
        "{got}"
    );
    let r = p.current.get().log.snapshot();
    assert_eq!(r.denied.len(), 1, "{r:?}");
    assert_eq!(
        (
            r.denied[0].host.as_str(),
            r.denied[0].port,
            r.denied[0].reason.as_str()
        ),
        ("127.0.0.1", up.port(), why.as_str())
    );
    assert_eq!(server.connections(), 0);
    // A malformed head names no target: answered, not recorded.
    let junk = ask(p.addr, "GET /relative HTTP/1.1\r\n\r\n").await;
    assert!(junk.starts_with("HTTP/1.1 400"), "{junk}");
    assert_eq!(p.current.get().log.snapshot().denied.len(), 1);
    let ok = ask(
        p.addr,
        &format!("GET http://{up}/ HTTP/1.1\r\nHost: {up}\r\n\r\n"),
    )
    .await;
    assert!(
        ok.starts_with("HTTP/1.1 200 OK") && ok.ends_with("ok"),
        "{ok}"
    );
    assert_eq!(server.connections(), 1);
}
