//! A TLS upstream of the test's own: a CA made for the test (given to the
//! server through `network.upstream_ca`), a leaf for the names it serves,
//! and an HTTP/1.1 server that answers each request with what it received,
//! as JSON, and records it. Secrets tests see through it what the egress
//! proxy placed, and what the jail read back.

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

/// A CA of the test's, and leaves it signs.
pub struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    pub pem: String,
}

impl TestCa {
    pub fn new(name: &str) -> TestCa {
        let key = KeyPair::generate().expect("a CA key");
        let mut p = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        p.distinguished_name.push(DnType::CommonName, name);
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.key_usages = vec![KeyUsagePurpose::KeyCertSign];
        let cert = p.self_signed(&key).expect("the CA");
        TestCa {
            pem: cert.pem(),
            issuer: Issuer::new(p, key),
        }
    }

    /// A server configuration with one leaf for `names`.
    pub fn server_config(&self, names: &[&str]) -> Arc<rustls::ServerConfig> {
        let key = KeyPair::generate().expect("a leaf key");
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let p = CertificateParams::new(names).expect("leaf params");
        let leaf = p.signed_by(&key, &self.issuer).expect("the leaf");
        let der = PrivateKeyDer::try_from(key.serialize_der()).expect("the key");
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(vec![CertificateDer::from(leaf.der().to_vec())], der)
            .expect("the server's config");
        Arc::new(config)
    }
}

/// What the upstream received: one request.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Received {
    pub head: String,
    pub body: String,
    pub sni: Option<String>,
}

/// The upstream: answers every request on its listener, until dropped.
pub struct TlsUpstream {
    pub received: Arc<Mutex<Vec<Received>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TlsUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TlsUpstream {
    /// Serves `listener` with `config`. Each answer is JSON of the request
    /// (its head, body and TLS server name), `Content-Length` framed.
    pub fn serve(
        listener: std::net::TcpListener,
        config: Arc<rustls::ServerConfig>,
    ) -> TlsUpstream {
        listener.set_nonblocking(true).expect("nonblocking");
        let listener = TcpListener::from_std(listener).expect("a tokio listener");
        let received: Arc<Mutex<Vec<Received>>> = Arc::default();
        let r = received.clone();
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                // Small writes (the session tickets, then the answer) go
                // out at once, as a real server's would.
                let _ = tcp.set_nodelay(true);
                let (acceptor, r) = (acceptor.clone(), r.clone());
                tokio::spawn(async move {
                    if let Ok(tls) = acceptor.accept(tcp).await {
                        let sni = tls.get_ref().1.server_name().map(str::to_string);
                        answer_all(tls, sni, &r).await;
                    }
                });
            }
        });
        TlsUpstream { received, task }
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

async fn answer_all<S: AsyncRead + AsyncWrite + Unpin>(
    mut s: S,
    sni: Option<String>,
    received: &Mutex<Vec<Received>>,
) {
    let mut buf = Vec::new();
    loop {
        let Some(end) = read_until_head(&mut s, &mut buf).await else {
            return;
        };
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        let length = head
            .lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.trim().parse::<usize>().ok())
            .unwrap_or(0);
        let mut body = buf.split_off(end);
        while body.len() < length {
            let mut chunk = [0u8; 8192];
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => body.extend_from_slice(&chunk[..n]),
            }
        }
        buf = body.split_off(length);
        let got = Received {
            head,
            body: String::from_utf8_lossy(&body).into_owned(),
            sni: sni.clone(),
        };
        received.lock().unwrap().push(got.clone());
        let json = serde_json::to_string(&got).unwrap_or_default();
        let close = got.head.to_ascii_lowercase().contains("connection: close");
        let reply = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{}\r\n{json}",
            json.len(),
            if close { "Connection: close\r\n" } else { "" }
        );
        if s.write_all(reply.as_bytes()).await.is_err() || close {
            let _ = s.shutdown().await;
            return;
        }
    }
}

/// Reads until `buf` holds a whole head; its end (after the blank line).
async fn read_until_head<S: AsyncRead + Unpin>(s: &mut S, buf: &mut Vec<u8>) -> Option<usize> {
    loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            return Some(at + 4);
        }
        if buf.len() > 64 * 1024 {
            return None;
        }
        let mut chunk = [0u8; 8192];
        match s.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}
