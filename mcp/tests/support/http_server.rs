//! A tiny loopback HTTP/1.1 server (on `prims_tests::http`) that serves
//! fixed files and records every request (method, headers, body), one
//! request per connection.

use prims_tests::http::HttpServer;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::io::AsyncWriteExt;

#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

pub struct FileServer {
    pub addr: SocketAddr,
    pub requests: Arc<Mutex<Vec<Recorded>>>,
    _http: HttpServer,
}

impl FileServer {
    /// Serves GET of `files` (path → body); answers PUT with `put_status`.
    pub async fn start(files: HashMap<String, Vec<u8>>, put_status: u16) -> FileServer {
        let requests: Arc<Mutex<Vec<Recorded>>> = Default::default();
        let (reqs, files) = (requests.clone(), Arc::new(files));
        let http = HttpServer::loopback(move |head, mut conn| {
            let (reqs, files) = (reqs.clone(), files.clone());
            async move {
                let Ok(body) = head.body_until_eof(&mut conn).await else {
                    return;
                };
                let req = Recorded {
                    method: head.method().to_owned(),
                    path: head.path().to_owned(),
                    headers: head.headers(),
                    body,
                };
                let (status, body) = match req.method.as_str() {
                    "GET" => match files.get(&req.path) {
                        Some(b) => (200, b.clone()),
                        None => (404, b"not found".to_vec()),
                    },
                    "PUT" => (put_status, Vec::new()),
                    _ => (405, Vec::new()),
                };
                reqs.lock().unwrap().push(req);
                let head = format!(
                    "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = conn.write_all(head.as_bytes()).await;
                let _ = conn.write_all(&body).await;
                let _ = conn.shutdown().await;
            }
        });
        FileServer {
            addr: http.addr,
            requests,
            _http: http,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn count(&self, method: &str) -> usize {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.method == method)
            .count()
    }
}
