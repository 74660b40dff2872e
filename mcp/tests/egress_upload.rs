//! Uploads to a real loopback HTTP server: the wire format (a PUT with a
//! Content-Length, never chunked), the size limit, statuses and redirects.

mod egress_support;

use bytes::Bytes;
use egress_support::{init_tracing, loopback_only, policy, Reply, Server};
use prims_mcp::egress::{Egress, EgressError, Uploaded};

async fn ok_server() -> Server {
    Server::start("127.0.0.1:0", |_| Reply::Full(200, vec![], Vec::new())).await
}

#[tokio::test]
async fn the_body_goes_out_with_a_content_length() {
    init_tracing();
    let server = ok_server().await;
    let egress = Egress::new(&loopback_only()).unwrap();
    let body: Vec<u8> = (0..40_000u32).map(|i| (i % 256) as u8).collect();
    let url = server.url("/bucket/key?X-Amz-Signature=abc");
    let up = egress
        .upload(&url, Bytes::from(body.clone()), "image/png")
        .await
        .unwrap();
    assert_eq!(
        up,
        Uploaded {
            status: 200,
            bytes: 40_000
        }
    );
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    let req = &reqs[0];
    assert_eq!(req.method, "PUT");
    assert_eq!(req.path, "/bucket/key?X-Amz-Signature=abc");
    assert_eq!(req.header("content-length"), Some("40000"));
    assert_eq!(req.header("transfer-encoding"), None, "chunked upload");
    assert_eq!(req.header("content-type"), Some("image/png"));
    assert!(req.body == body, "body differs");
}

#[tokio::test]
async fn an_empty_upload_still_has_a_content_length() {
    let server = ok_server().await;
    let egress = Egress::new(&loopback_only()).unwrap();
    let up = egress
        .upload(&server.url("/empty"), Bytes::new(), "text/plain")
        .await
        .unwrap();
    assert_eq!(up.bytes, 0);
    let req = &server.requests()[0];
    assert_eq!(req.header("content-length"), Some("0"));
    assert_eq!(req.header("transfer-encoding"), None);
}

#[tokio::test]
async fn a_body_over_max_upload_is_refused_without_connecting() {
    let server = ok_server().await;
    let egress = Egress::new(&loopback_only()).unwrap();
    let err = egress
        .upload(
            &server.url("/k"),
            Bytes::from(vec![0u8; 64 * 1024 + 1]),
            "text/plain",
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, EgressError::TooLarge { limit: 65536 }),
        "{err:?}"
    );
    assert_eq!(server.connection_count(), 0);
}

#[tokio::test]
async fn an_error_status_is_upload_failed() {
    for status in [400u16, 403, 404, 500, 503] {
        let server = Server::start("127.0.0.1:0", move |_| {
            Reply::Full(status, vec![], b"<Error/>".to_vec())
        })
        .await;
        let egress = Egress::new(&loopback_only()).unwrap();
        let err = egress
            .upload(&server.url("/k"), Bytes::from_static(b"x"), "text/plain")
            .await
            .unwrap_err();
        assert!(
            matches!(err, EgressError::Status { status: s } if s == status),
            "{err:?}"
        );
        assert_eq!(err.to_string(), format!("Upload failed with HTTP {status}"));
    }
}

#[tokio::test]
async fn only_method_preserving_redirects_are_followed() {
    init_tracing();
    let server = Server::start("127.0.0.1:0", |req| match req.path.as_str() {
        "/temporary" => Reply::Redirect(307, "/stored".into()),
        "/permanent" => Reply::Redirect(308, "/stored".into()),
        "/found" => Reply::Redirect(302, "/stored".into()),
        "/see-other" => Reply::Redirect(303, "/stored".into()),
        "/metadata" => Reply::Redirect(307, "http://169.254.169.254/".into()),
        _ => Reply::Full(200, vec![], Vec::new()),
    })
    .await;
    let egress = Egress::new(&loopback_only()).unwrap();
    for path in ["/temporary", "/permanent"] {
        let up = egress
            .upload(
                &server.url(path),
                Bytes::from_static(b"payload"),
                "text/plain",
            )
            .await
            .unwrap();
        assert_eq!(up.bytes, 7);
        let last = server.requests().pop().unwrap();
        assert_eq!(
            (last.method.as_str(), last.path.as_str()),
            ("PUT", "/stored")
        );
        assert_eq!(last.body, b"payload");
    }
    // A 302/303 would turn the PUT into a GET that "succeeds" storing nothing.
    for (path, status) in [("/found", 302), ("/see-other", 303)] {
        let err = egress
            .upload(
                &server.url(path),
                Bytes::from_static(b"payload"),
                "text/plain",
            )
            .await
            .unwrap_err();
        assert!(
            matches!(err, EgressError::Status { status: s } if s == status),
            "{err:?}"
        );
    }
    let err = egress
        .upload(
            &server.url("/metadata"),
            Bytes::from_static(b"x"),
            "text/plain",
        )
        .await
        .unwrap_err();
    assert!(matches!(err, EgressError::Blocked { .. }), "{err:?}");
}

#[tokio::test]
async fn uploads_obey_the_guard_and_header_rules() {
    let server = ok_server().await;
    let guarded = Egress::new(&policy(&[])).unwrap();
    let err = guarded
        .upload(&server.url("/k"), Bytes::from_static(b"x"), "text/plain")
        .await
        .unwrap_err();
    assert!(matches!(err, EgressError::Blocked { .. }), "{err:?}");
    let egress = Egress::new(&loopback_only()).unwrap();
    let err = egress
        .upload(
            &server.url("/k"),
            Bytes::from_static(b"x"),
            "text/plain\r\nX-Evil: 1",
        )
        .await
        .unwrap_err();
    assert!(matches!(err, EgressError::BadContentType { .. }), "{err:?}");
    assert_eq!(server.connection_count(), 0);
}
