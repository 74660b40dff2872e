//! Real loopback HTTP/1.1 servers for the egress tests (no mocks: the client
//! under test talks TCP to them), on `prims_tests::http`, and policy helpers.
#![allow(dead_code)] // each test binary uses a different part

pub mod s3;

use prims_policy::{ByteSize, Egress as EgressPolicy, HumanDuration};
use prims_tests::http::HttpServer;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// A policy with `allow` and test-sized limits (1 MiB down, 64 KiB up, 5 s).
pub fn policy(allow: &[&str]) -> EgressPolicy {
    EgressPolicy {
        allow: allow.iter().map(|s| s.to_string()).collect(),
        max_download: ByteSize::mib(1),
        max_upload: ByteSize::kib(64),
        timeout: HumanDuration::secs(5),
    }
}

pub fn loopback_only() -> EgressPolicy {
    policy(&["127.0.0.1/32"])
}

pub fn with_timeout(mut p: EgressPolicy, ms: u64) -> EgressPolicy {
    p.timeout = HumanDuration(Duration::from_millis(ms));
    p
}

/// Logs to the test output with RUST_LOG=debug.
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

pub enum Reply {
    /// A complete response with a Content-Length.
    Full(u16, Vec<(&'static str, String)>, Vec<u8>),
    /// A 3xx with this Location.
    Redirect(u16, String),
    /// 200 with a chunked body that never ends.
    Endless,
    /// 200 claiming this Content-Length, then silence.
    Claims(u64),
    /// Reads the request and never answers.
    Stall,
}

type Handler = dyn Fn(&Request) -> Reply + Send + Sync;

/// A server on `bind` ("127.0.0.1:0", "[::1]:0"); one request per connection.
pub struct Server {
    pub addr: SocketAddr,
    pub requests: Arc<Mutex<Vec<Request>>>,
    /// Body bytes written by `Reply::Endless`.
    pub endless_sent: Arc<AtomicU64>,
    http: HttpServer,
}

impl Server {
    pub async fn start(
        bind: &str,
        handler: impl Fn(&Request) -> Reply + Send + Sync + 'static,
    ) -> Server {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let endless_sent = Arc::new(AtomicU64::new(0));
        let handler: Arc<Handler> = Arc::new(handler);
        let (r, e) = (requests.clone(), endless_sent.clone());
        let http = HttpServer::bind(bind, move |req, stream| {
            let (h, r, e) = (handler.clone(), r.clone(), e.clone());
            async move {
                let _ = handle(req, stream, h, r, e).await;
            }
        });
        Server {
            addr: http.addr,
            requests,
            endless_sent,
            http,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// TCP connections accepted.
    pub fn connection_count(&self) -> usize {
        self.http.connections()
    }

    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }
}

/// The request `head` read, with its body (Content-Length bytes).
async fn read_request(
    head: prims_tests::http::Request,
    stream: &mut TcpStream,
) -> std::io::Result<Request> {
    Ok(Request {
        method: head.method().to_string(),
        path: head.path().to_string(),
        headers: head.headers(),
        body: head.body(stream).await?,
    })
}

async fn handle(
    head: prims_tests::http::Request,
    mut stream: TcpStream,
    handler: Arc<Handler>,
    requests: Arc<Mutex<Vec<Request>>>,
    endless_sent: Arc<AtomicU64>,
) -> std::io::Result<()> {
    let req = read_request(head, &mut stream).await?;
    let reply = handler(&req);
    requests.lock().unwrap().push(req);
    let head = |status: u16, extra: &str| {
        format!("HTTP/1.1 {status} X\r\nConnection: close\r\n{extra}\r\n")
    };
    match reply {
        Reply::Full(status, headers, body) => {
            let mut extra = format!("Content-Length: {}\r\n", body.len());
            for (k, v) in headers {
                extra.push_str(&format!("{k}: {v}\r\n"));
            }
            stream.write_all(head(status, &extra).as_bytes()).await?;
            stream.write_all(&body).await?;
        }
        Reply::Redirect(status, location) => {
            let extra = format!("Location: {location}\r\nContent-Length: 0\r\n");
            stream.write_all(head(status, &extra).as_bytes()).await?;
        }
        Reply::Endless => {
            stream
                .write_all(head(200, "Transfer-Encoding: chunked\r\n").as_bytes())
                .await?;
            let chunk = [b'x'; 16 * 1024];
            let framed = [format!("{:x}\r\n", chunk.len()).as_bytes(), &chunk, b"\r\n"].concat();
            loop {
                stream.write_all(&framed).await?;
                endless_sent.fetch_add(chunk.len() as u64, Ordering::SeqCst);
            }
        }
        Reply::Claims(len) => {
            let extra = format!("Content-Length: {len}\r\n");
            stream.write_all(head(200, &extra).as_bytes()).await?;
            stream.write_all(b"just the start").await?;
            tokio::time::sleep(Duration::from_secs(60)).await;
        }
        Reply::Stall => tokio::time::sleep(Duration::from_secs(60)).await,
    }
    stream.shutdown().await
}
