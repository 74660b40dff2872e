//! The SSRF guard: addresses that are not the public internet are refused
//! before any connection is made (IP literals) or at connect time (names),
//! unless the policy's `egress.allow` names them.

mod egress_support;

use egress_support::{init_tracing, policy, Reply, Server};
use prims_mcp::egress::{blocked_name, classify, Egress, EgressError};
use std::net::IpAddr;
use std::time::{Duration, Instant};

async fn file_server(bind: &str) -> Server {
    Server::start(bind, |_| Reply::Full(200, vec![], b"file".to_vec())).await
}

async fn refused(egress: &Egress, url: &str) -> EgressError {
    let started = Instant::now();
    let err = egress
        .download(url)
        .await
        .map(|_| ())
        .expect_err(&format!("{url} was fetched"));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{url}: refusing took {:?}",
        started.elapsed()
    );
    err
}

#[tokio::test]
async fn loopback_is_refused_without_connecting() {
    init_tracing();
    let v4 = file_server("127.0.0.1:0").await;
    let v6 = file_server("[::1]:0").await;
    let (p4, p6) = (v4.addr.port(), v6.addr.port());
    let egress = Egress::new(&policy(&[])).unwrap();
    for url in [
        format!("http://127.0.0.1:{p4}/"),
        format!("http://localhost:{p4}/"),
        format!("http://0.0.0.0:{p4}/"),
        format!("http://[::ffff:127.0.0.1]:{p4}/"),
        format!("http://2130706433:{p4}/"),
        format!("http://0x7f.1:{p4}/"),
        format!("https://127.0.0.1:{p4}/"),
        format!("http://[::1]:{p6}/"),
        format!("http://localhost:{p6}/"),
    ] {
        let err = refused(&egress, &url).await;
        let EgressError::Blocked { addr, .. } = &err else {
            panic!("{url}: {err:?}");
        };
        let addr = addr.unwrap_or_else(|| panic!("{url}: no address in {err}"));
        assert!(classify(addr).is_some(), "{url}: {addr}");
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        v4.connection_count(),
        0,
        "a refused URL reached the listener"
    );
    assert_eq!(
        v6.connection_count(),
        0,
        "a refused URL reached the listener"
    );
}

#[tokio::test]
async fn private_link_local_and_metadata_are_refused_before_connecting() {
    init_tracing();
    let egress = Egress::new(&policy(&[])).unwrap();
    for url in [
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
        "http://172.16.5.4/",
        "http://192.168.1.1/",
        "http://100.64.0.1/",
        "http://[fd00:ec2::254]/",
        "http://[fe80::1]/",
        "http://[::ffff:169.254.169.254]/",
        "http://[::ffff:10.0.0.1]/",
        "http://[64:ff9b::a9fe:a9fe]/",
        "http://224.0.0.1/",
        "http://255.255.255.255/",
        "http://metadata.google.internal/computeMetadata/v1/",
        "http://metadata/computeMetadata/v1/",
    ] {
        let err = refused(&egress, url).await;
        assert!(matches!(err, EgressError::Blocked { .. }), "{url}: {err:?}");
        let msg = err.to_string();
        assert!(msg.starts_with("refused: "), "{msg}");
    }
    let err = refused(&egress, "http://169.254.169.254/").await;
    assert!(err.to_string().contains("metadata"), "{err}");
}

#[tokio::test]
async fn only_http_and_https_urls_are_fetched() {
    let egress = Egress::new(&policy(&["127.0.0.1/32"])).unwrap();
    for url in [
        "ftp://127.0.0.1/x",
        "file:///etc/passwd",
        "gopher://127.0.0.1/",
        "data:,hi",
    ] {
        let err = refused(&egress, url).await;
        assert!(
            matches!(err, EgressError::SchemeNotAllowed { .. }),
            "{url}: {err:?}"
        );
    }
    for url in ["not a url", "http://", "/relative/path", ""] {
        let err = refused(&egress, url).await;
        assert!(
            matches!(err, EgressError::BadUrl { .. }),
            "{url:?}: {err:?}"
        );
    }
}

#[tokio::test]
async fn allowed_loopback_works() {
    init_tracing();
    let server = file_server("127.0.0.1:0").await;
    let port = server.addr.port();
    let egress = Egress::new(&policy(&["127.0.0.1/32"])).unwrap();
    for url in [
        format!("http://127.0.0.1:{port}/"),
        format!("http://localhost:{port}/"),
    ] {
        let dl = egress
            .download(&url)
            .await
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        assert_eq!(dl.bytes().await.unwrap(), b"file");
    }
    // 127.0.0.2 is outside the allowed block.
    let err = refused(&egress, &format!("http://127.0.0.2:{port}/")).await;
    assert!(matches!(err, EgressError::Blocked { .. }), "{err:?}");

    // A hostname rule allows that name's addresses, not the bare address.
    let by_name = Egress::new(&policy(&["localhost"])).unwrap();
    let dl = by_name
        .download(&format!("http://localhost:{port}/"))
        .await
        .unwrap();
    assert_eq!(dl.bytes().await.unwrap(), b"file");
    let err = refused(&by_name, &format!("http://127.0.0.1:{port}/")).await;
    assert!(matches!(err, EgressError::Blocked { .. }), "{err:?}");
}

#[test]
fn invalid_allow_entries_are_an_error() {
    let err = Egress::new(&policy(&["10.0.0.1/8"])).expect_err("accepted");
    assert!(err.to_string().contains("egress.allow"), "{err}");
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn classifier_refuses_every_non_public_range() {
    for a in [
        "127.0.0.1",
        "127.255.255.254",
        "10.1.2.3",
        "172.16.0.1",
        "172.31.255.255",
        "192.168.0.1",
        "169.254.169.254",
        "169.254.0.1",
        "0.0.0.0",
        "0.1.2.3",
        "100.64.0.1",
        "100.127.255.255",
        "224.0.0.251",
        "239.255.255.250",
        "255.255.255.255",
        "240.0.0.1",
        "192.0.0.8",
        "192.0.2.1",
        "198.18.0.1",
        "198.51.100.7",
        "203.0.113.9",
        "::",
        "::1",
        "fc00::1",
        "fd12:3456::1",
        "fe80::1",
        "febf::1",
        "fec0::1",
        "ff02::1",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        "::ffff:169.254.169.254",
        "::ffff:0.0.0.0",
        "::127.0.0.1",
        "64:ff9b::7f00:1",
        "64:ff9b::a9fe:a9fe",
        "64:ff9b:1::1",
        "2002:7f00:1::1",
        "2002:a9fe:a9fe::",
        "2001:db8::1",
        "2001::1",
        "100::1",
        "3fff::1",
        "4000::1",
    ] {
        assert!(classify(ip(a)).is_some(), "{a} was treated as public");
    }
}

#[test]
fn classifier_allows_public_addresses() {
    for a in [
        "8.8.8.8",
        "1.1.1.1",
        "93.184.216.34",
        "100.63.255.255",
        "100.128.0.0",
        "172.15.255.255",
        "172.32.0.0",
        "192.167.255.255",
        "192.169.0.0",
        "169.253.255.255",
        "223.255.255.255",
        "11.0.0.1",
        "2606:4700:4700::1111",
        "2a00:1450:4001::200e",
        "::ffff:8.8.8.8",
        "64:ff9b::808:808",
        "2002:808:808::1",
    ] {
        assert_eq!(classify(ip(a)), None, "{a} was refused");
    }
}

#[test]
fn classifier_explains_itself() {
    assert_eq!(classify(ip("127.0.0.1")), Some("loopback address"));
    assert!(classify(ip("169.254.169.254"))
        .unwrap()
        .contains("metadata"));
    assert!(classify(ip("100.64.1.1"))
        .unwrap()
        .contains("carrier-grade NAT"));
    assert_eq!(
        classify(ip("::ffff:192.168.1.1")),
        classify(ip("192.168.1.1"))
    );
    assert!(blocked_name("metadata.google.internal").is_some());
    assert!(blocked_name("Metadata.Google.Internal.").is_some());
    assert!(blocked_name("anything.internal").is_some());
    assert!(blocked_name("example.com").is_none());
    assert!(blocked_name("internal.example.com").is_none());
}
