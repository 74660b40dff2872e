//! `persist_artifact`'s upload against real S3-compatible servers on
//! loopback, with presigned URLs made by a real SDK (boto3, SigV4).
//! s3s-fs verifies presigned signatures (and the signed Content-Type), so an
//! upload it accepts is one real S3 would accept; moto is a second,
//! independent implementation of the PUT path.

mod egress_support;

use bytes::Bytes;
use egress_support::s3::{Kind, S3Server};
use egress_support::{init_tracing, loopback_only};
use prims_mcp::egress::{Egress, EgressError, Uploaded};

/// 48 KiB of every byte value, under the tests' 64 KiB max_upload.
fn payload() -> Vec<u8> {
    (0..48 * 1024u32).map(|i| (i * 31 % 251) as u8).collect()
}

async fn start(kind: Kind) -> S3Server {
    let server = tokio::task::spawn_blocking(move || S3Server::start(kind))
        .await
        .expect("start the S3 server");
    server.create_bucket("prims-artifacts");
    server
}

async fn round_trip(kind: Kind) {
    init_tracing();
    let s3 = start(kind).await;
    let url = s3.presign_put("prims-artifacts", "output/report.csv", "text/csv");
    assert!(url.contains("X-Amz-Signature="), "not a SigV4 URL: {url}");
    let egress = Egress::new(&loopback_only()).unwrap();
    let body = payload();
    let up = egress
        .upload(&url, Bytes::from(body.clone()), "text/csv")
        .await
        .unwrap_or_else(|e| panic!("upload to {kind:?} failed: {e}"));
    assert_eq!(
        up,
        Uploaded {
            status: 200,
            bytes: body.len() as u64
        }
    );
    let (stored, content_type) = s3
        .get("prims-artifacts", "output/report.csv")
        .expect("the object exists");
    assert!(stored == body, "stored bytes differ from the upload");
    assert_eq!(content_type.as_deref(), Some("text/csv"));
}

#[tokio::test]
async fn presigned_put_round_trips_through_s3s() {
    round_trip(Kind::S3s).await;
}

#[tokio::test]
async fn presigned_put_round_trips_through_moto() {
    round_trip(Kind::Moto).await;
}

#[tokio::test]
async fn a_tampered_signature_is_http_403() {
    init_tracing();
    let s3 = start(Kind::S3s).await;
    let url = s3.presign_put("prims-artifacts", "tampered.txt", "text/plain");
    let (head, sig) = url.split_once("X-Amz-Signature=").expect("signature");
    let flipped = if sig.starts_with('0') { "1" } else { "0" };
    let tampered = format!("{head}X-Amz-Signature={flipped}{}", &sig[1..]);
    let egress = Egress::new(&loopback_only()).unwrap();
    let err = egress
        .upload(&tampered, Bytes::from_static(b"hello"), "text/plain")
        .await
        .unwrap_err();
    assert!(
        matches!(err, EgressError::Status { status: 403 }),
        "{err:?}"
    );
    assert_eq!(err.to_string(), "Upload failed with HTTP 403");
    assert!(s3.get("prims-artifacts", "tampered.txt").is_none());

    // The Content-Type is signed too: sending another one is refused.
    let url = s3.presign_put("prims-artifacts", "typed.txt", "text/plain");
    let err = egress
        .upload(&url, Bytes::from_static(b"hello"), "text/html")
        .await
        .unwrap_err();
    assert!(
        matches!(err, EgressError::Status { status: 403 }),
        "{err:?}"
    );
    assert!(s3.get("prims-artifacts", "typed.txt").is_none());
}

#[tokio::test]
async fn an_upload_over_max_upload_is_refused_before_sending() {
    init_tracing();
    let s3 = start(Kind::S3s).await;
    let url = s3.presign_put("prims-artifacts", "big.bin", "application/octet-stream");
    let egress = Egress::new(&loopback_only()).unwrap();
    let body = Bytes::from(vec![7u8; 64 * 1024 + 1]);
    let err = egress
        .upload(&url, body, "application/octet-stream")
        .await
        .unwrap_err();
    assert!(
        matches!(err, EgressError::TooLarge { limit: 65536 }),
        "{err:?}"
    );
    assert!(s3.get("prims-artifacts", "big.bin").is_none());
    // Exactly the limit is fine.
    let up = egress
        .upload(
            &url,
            Bytes::from(vec![7u8; 64 * 1024]),
            "application/octet-stream",
        )
        .await
        .unwrap();
    assert_eq!(up.bytes, 65536);
}
