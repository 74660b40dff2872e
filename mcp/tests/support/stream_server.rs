//! A loopback HTTP/1.1 server whose bodies are generated while they are
//! sent, so a test can serve hundreds of megabytes without holding them.
//! GET `/chunked/<n>` answers `n` bytes with `Transfer-Encoding: chunked`
//! and no Content-Length; `/sized/<n>` the same bytes with a Content-Length.
//! One request per connection, on `prims_tests::http`.

use prims_tests::http::HttpServer;
use sha2::{Digest, Sha256};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// Bodies are made of blocks of this size (the last one cut short).
pub const BLOCK: usize = 64 * 1024;

/// Block `i` of every body: a fixed pseudo-random block whose first 8
/// bytes are `i`, so a lost, repeated or reordered block changes the
/// checksum, not just a flipped byte.
pub struct Pattern {
    template: Vec<u8>,
}

impl Default for Pattern {
    fn default() -> Self {
        Pattern::new()
    }
}

impl Pattern {
    pub fn new() -> Pattern {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let template = (0..BLOCK)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect();
        Pattern { template }
    }

    /// Writes block `i` into `out`, which is `BLOCK` bytes long.
    pub fn block(&self, i: u64, out: &mut [u8]) {
        out.copy_from_slice(&self.template);
        out[..8].copy_from_slice(&i.to_le_bytes());
    }

    /// The sha256 (hex) of the `n`-byte body.
    pub fn sha256(&self, n: u64) -> String {
        let mut h = Sha256::new();
        let mut buf = vec![0u8; BLOCK];
        let mut left = n;
        let mut i = 0;
        while left > 0 {
            let len = left.min(BLOCK as u64) as usize;
            self.block(i, &mut buf);
            h.update(&buf[..len]);
            left -= len as u64;
            i += 1;
        }
        hex::encode(h.finalize())
    }
}

pub struct StreamServer {
    pub addr: SocketAddr,
    /// GET requests answered.
    pub gets: Arc<AtomicUsize>,
    _http: HttpServer,
}

impl StreamServer {
    pub async fn start() -> StreamServer {
        let gets = Arc::new(AtomicUsize::new(0));
        let pattern = Arc::new(Pattern::new());
        let counter = gets.clone();
        let http = HttpServer::loopback(move |head, conn| {
            let (pattern, counter) = (pattern.clone(), counter.clone());
            async move {
                let _ = serve(head.path(), conn, &pattern, &counter).await;
            }
        });
        StreamServer {
            addr: http.addr,
            gets,
            _http: http,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn gets(&self) -> usize {
        self.gets.load(Ordering::SeqCst)
    }
}

async fn serve(
    path: &str,
    mut conn: TcpStream,
    pattern: &Pattern,
    gets: &AtomicUsize,
) -> std::io::Result<()> {
    gets.fetch_add(1, Ordering::SeqCst);
    let (chunked, n) = match path.split('/').collect::<Vec<_>>()[..] {
        ["", "chunked", n] => (true, n.parse::<u64>().ok()),
        ["", "sized", n] => (false, n.parse::<u64>().ok()),
        _ => (false, None),
    };
    let Some(n) = n else {
        let resp = "HTTP/1.1 404 X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        conn.write_all(resp.as_bytes()).await?;
        return conn.shutdown().await;
    };
    let length = if chunked {
        "Transfer-Encoding: chunked".to_owned()
    } else {
        format!("Content-Length: {n}")
    };
    let resp = format!("HTTP/1.1 200 OK\r\n{length}\r\nConnection: close\r\n\r\n");
    conn.write_all(resp.as_bytes()).await?;
    let mut buf = vec![0u8; BLOCK];
    let (mut left, mut i) = (n, 0);
    while left > 0 {
        let len = left.min(BLOCK as u64) as usize;
        pattern.block(i, &mut buf);
        if chunked {
            conn.write_all(format!("{len:x}\r\n").as_bytes()).await?;
            conn.write_all(&buf[..len]).await?;
            conn.write_all(b"\r\n").await?;
        } else {
            conn.write_all(&buf[..len]).await?;
        }
        left -= len as u64;
        i += 1;
    }
    if chunked {
        conn.write_all(b"0\r\n\r\n").await?;
    }
    conn.shutdown().await
}
