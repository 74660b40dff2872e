//! Proxy environment variables must not route requests past the guard: the
//! client never uses a proxy. Its own binary, because it changes the
//! environment of the whole process.

mod egress_support;

use egress_support::{loopback_only, Reply, Server};
use prims_mcp::egress::Egress;

#[tokio::test]
async fn proxy_variables_are_ignored() {
    let proxy = Server::start("127.0.0.1:0", |_| {
        Reply::Full(200, vec![], b"proxied".to_vec())
    })
    .await;
    let origin = Server::start("127.0.0.1:0", |_| {
        Reply::Full(200, vec![], b"direct".to_vec())
    })
    .await;
    let proxy_url = proxy.url("");
    for var in [
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
    ] {
        // The only test in this binary, so no other thread reads the
        // environment while it changes.
        std::env::set_var(var, &proxy_url);
    }
    std::env::remove_var("NO_PROXY");
    std::env::remove_var("no_proxy");
    let egress = Egress::new(&loopback_only()).unwrap();
    let dl = egress.download(&origin.url("/file")).await.unwrap();
    assert_eq!(dl.bytes().await.unwrap(), b"direct");
    assert_eq!(
        proxy.connection_count(),
        0,
        "the request went through the proxy"
    );
    assert_eq!(origin.connection_count(), 1);
}
