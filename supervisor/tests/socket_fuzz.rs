//! Arbitrary bytes on fresh connections, before and after the handshake:
//! every connection ends, and the daemon keeps answering a good client.

mod socket_support;

use proptest::prelude::*;
use socket_support::*;
use std::sync::OnceLock;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

fn shared() -> &'static (tokio::runtime::Runtime, TestServer) {
    static SHARED: OnceLock<(tokio::runtime::Runtime, TestServer)> = OnceLock::new();
    SHARED.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let server = rt.block_on(start());
        (rt, server)
    })
}

async fn throw_at_server(server: &TestServer, bytes: &[u8], after_hello: bool) {
    let mut s = if after_hello {
        raw_hello(server).await
    } else {
        UnixStream::connect(&server.path).await.unwrap()
    };
    // The server may hang up mid-write; that is one of the allowed outcomes.
    let _ = s.write_all(bytes).await;
    let _ = s.shutdown().await;
    let mut sink = vec![0u8; 16 * 1024];
    let ended = tokio::time::timeout(Duration::from_secs(5), async {
        while let Ok(n) = s.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the server kept a fuzzed connection open");
    server.assert_alive().await;
}

/// Frames with a correct length and a body that looks almost like a request.
fn near_requests() -> impl Strategy<Value = Vec<u8>> {
    let body = r#"\{"id":[0-9]{1,3},"body":\{"op":"(stats|run|cancel|mount_chunk|mount_end|write_mount|list_dir|[a-z_]{1,10})"(,"[a-z_]{1,10}":("[a-zA-Z0-9=]{0,8}"|[0-9]{1,4}))?\}\}"#;
    prop::collection::vec(body, 1..4).prop_map(|bodies| {
        let mut out = Vec::new();
        for b in bodies {
            out.extend((b.len() as u32).to_be_bytes());
            out.extend(b.into_bytes());
        }
        out
    })
}

/// A correct length header around arbitrary bytes.
fn framed_noise() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..512).prop_map(|body| {
        let mut out = (body.len() as u32).to_be_bytes().to_vec();
        out.extend(body);
        out
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 300,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn arbitrary_input_never_hurts_the_daemon(
        bytes in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..2048),
            framed_noise(),
            near_requests(),
        ],
        after_hello in any::<bool>(),
    ) {
        let (rt, server) = shared();
        rt.block_on(throw_at_server(server, &bytes, after_hello));
    }
}
