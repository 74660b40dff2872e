//! An in-process HTTP/1.1 test server (tokio), for tests that need a real
//! peer on a TCP socket: an upstream behind the egress proxy, a download or
//! upload target of the front-end, a package index.
//!
//! [`HttpServer`] accepts on a listener (the host's loopback, `[::1]`, or
//! one a test made in a network namespace), reads each connection's
//! request head, records the connection and the head, and hands both to
//! the test's handler, which answers on the connection as it likes. Its
//! accept loop ends when the value is dropped.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A head longer than this closes the connection unanswered.
const MAX_HEAD: usize = 64 * 1024;

/// What a connection sent before its handler was called.
#[derive(Debug, Clone)]
pub struct Request {
    /// The request line and headers, through the blank line that ends them.
    pub head: String,
    /// Bytes read past the head: the start of a body (or of what else the
    /// peer sent).
    pub rest: Vec<u8>,
}

impl Request {
    /// The request line's method (`GET`), empty when it has none.
    pub fn method(&self) -> &str {
        self.head.split(' ').next().unwrap_or_default()
    }

    /// The request line's target (`/a?b`), empty when it has none.
    pub fn path(&self) -> &str {
        self.head.split(' ').nth(1).unwrap_or_default()
    }

    /// Every header line's name and value, trimmed, in order.
    pub fn headers(&self) -> Vec<(String, String)> {
        self.head
            .split("\r\n")
            .skip(1)
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect()
    }

    /// The first header called `name` (any case).
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers()
            .into_iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    /// The Content-Length, when there is a valid one.
    pub fn content_length(&self) -> Option<usize> {
        self.header("content-length")?.parse().ok()
    }

    /// The body of `Content-Length` bytes (none without one): [`Self::rest`]
    /// and then what `conn` still owes. A body cut short by EOF is an
    /// error.
    pub async fn body(&self, conn: &mut TcpStream) -> std::io::Result<Vec<u8>> {
        let len = self.content_length().unwrap_or(0);
        let mut body = self.rest.clone();
        body.truncate(len);
        let have = body.len();
        body.resize(len, 0);
        conn.read_exact(&mut body[have..]).await?;
        Ok(body)
    }

    /// Like [`Self::body`], but EOF before `Content-Length` bytes ends the
    /// body where it stopped.
    pub async fn body_until_eof(&self, conn: &mut TcpStream) -> std::io::Result<Vec<u8>> {
        let len = self.content_length().unwrap_or(0);
        let mut body = self.rest.clone();
        let mut chunk = [0u8; 8192];
        while body.len() < len {
            let n = conn.read(&mut chunk).await?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
        Ok(body)
    }
}

/// What an [`HttpServer`] was sent.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    /// TCP connections accepted.
    pub connections: usize,
    /// Per request, every byte read before its handler was called (the
    /// head and whatever came with it in the same reads), as text, in the
    /// order they came.
    pub heads: Vec<String>,
}

/// A server on a listener; its accept loop stops when this is dropped
/// (connections under way finish with their handlers).
pub struct HttpServer {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl HttpServer {
    /// On 127.0.0.1, at a free port. Call it inside a tokio runtime, as
    /// every constructor.
    pub fn loopback<F, Fut>(handle: F) -> HttpServer
    where
        F: Fn(Request, TcpStream) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        HttpServer::bind("127.0.0.1:0", handle)
    }

    /// On `addr` (`"[::1]:0"`, say).
    pub fn bind<F, Fut>(addr: &str, handle: F) -> HttpServer
    where
        F: Fn(Request, TcpStream) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let l = std::net::TcpListener::bind(addr)
            .unwrap_or_else(|e| panic!("binding a test server on {addr}: {e}"));
        HttpServer::on(l, handle)
    }

    /// On a listener the caller made (in a network namespace, say).
    pub fn on<F, Fut>(listener: std::net::TcpListener, handle: F) -> HttpServer
    where
        F: Fn(Request, TcpStream) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let l = TcpListener::from_std(listener).expect("a tokio listener");
        let addr = l.local_addr().expect("the listener's address");
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (record, handle) = (seen.clone(), Arc::new(handle));
        let task = tokio::spawn(async move {
            while let Ok((mut c, _)) = l.accept().await {
                record.lock().unwrap().connections += 1;
                let (record, handle) = (record.clone(), handle.clone());
                tokio::spawn(async move {
                    let Some(req) = read_head(&mut c, &record).await else {
                        return;
                    };
                    handle(req, c).await;
                });
            }
        });
        HttpServer { addr, seen, task }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://<addr><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// TCP connections accepted so far.
    pub fn connections(&self) -> usize {
        self.seen.lock().unwrap().connections
    }

    /// What each request sent up to its head's end (see [`Seen::heads`]).
    pub fn heads(&self) -> Vec<String> {
        self.seen.lock().unwrap().heads.clone()
    }
}

/// Reads until the bytes read hold a blank line; records them. `None` when
/// the peer closes or errs first, or the head is too long.
async fn read_head(c: &mut TcpStream, record: &Mutex<Seen>) -> Option<Request> {
    let mut buf = [0u8; 4096];
    let mut got = Vec::new();
    let end = loop {
        if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if got.len() > MAX_HEAD {
            return None;
        }
        match c.read(&mut buf).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    };
    record
        .lock()
        .unwrap()
        .heads
        .push(String::from_utf8_lossy(&got).into_owned());
    Some(Request {
        head: String::from_utf8_lossy(&got[..end]).into_owned(),
        rest: got[end..].to_vec(),
    })
}

/// Answers `HTTP/1.1 <status>` (`"200 OK"`) with `body`, its
/// Content-Length and `Connection: close`.
pub async fn reply(conn: &mut TcpStream, status: &str, body: &[u8]) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    conn.write_all(&[head.as_bytes(), body].concat()).await
}
