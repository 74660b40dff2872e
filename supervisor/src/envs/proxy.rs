//! The only way out of an install jail: an HTTP proxy, served here, outside
//! the jail, on a listener that lives in the jail's own network namespace
//! (the jail's init hands it over; see `NetworkMode::Proxy`). It reaches
//! the configured package index and `find_links` hosts, on their ports,
//! and nothing else: no host loopback, no front-end, no metadata service.
//!
//! Everything a jail sends is hostile. Only the request head is parsed
//! (at most `MAX_HEAD` bytes, within `HEAD_TIMEOUT`); after a `CONNECT` the
//! bytes are relayed unread (TLS end to end), and a plain-HTTP request is
//! passed on with its request line made origin-form.

use super::key::Settings;
use std::collections::BTreeSet;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// The port uv is told the proxy listens on, inside the jail.
pub(super) const PORT: u16 = 3128;
const MAX_HEAD: usize = 16 * 1024;
const HEAD_TIMEOUT: Duration = Duration::from_secs(15);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// Connections one build may have open at once.
const MAX_CONNECTIONS: usize = 64;
/// How long to wait for the jail's listener after the jailer started.
const LISTENER_TIMEOUT: Duration = Duration::from_secs(60);

/// The `host:port` pairs builds may reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Allowed(BTreeSet<(String, u16)>);

impl Allowed {
    /// The hosts of the index URLs and of `find_links` URLs (local
    /// directories are bound into the jail instead). uv's default index is
    /// PyPI, whose files live on files.pythonhosted.org.
    pub(super) fn from_settings(s: &Settings) -> Allowed {
        let mut set = BTreeSet::new();
        let index = if s.index_url.is_empty() {
            "https://pypi.org/simple"
        } else {
            &s.index_url
        };
        let urls = std::iter::once(index)
            .chain(s.extra_index_urls.iter().map(String::as_str))
            .chain(s.find_links.iter().map(String::as_str));
        for u in urls {
            let Ok(url) = url::Url::parse(u) else {
                continue;
            };
            if !matches!(url.scheme(), "http" | "https") {
                continue;
            }
            let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
                continue;
            };
            let host = host.trim_start_matches('[').trim_end_matches(']');
            set.insert((host.to_ascii_lowercase(), port));
            if host.eq_ignore_ascii_case("pypi.org") {
                set.insert(("files.pythonhosted.org".to_string(), 443));
            }
        }
        Allowed(set)
    }

    fn permits(&self, host: &str, port: u16) -> bool {
        self.0.contains(&(host.to_ascii_lowercase(), port))
    }

    fn describe(&self) -> String {
        let all: Vec<String> = self.0.iter().map(|(h, p)| format!("{h}:{p}")).collect();
        all.join(", ")
    }
}

/// Receives the jail's listener on `channel` and serves it until `stop`.
/// Returns when the build is over; a jail that never sends a listener (it
/// failed to start) just ends the wait.
pub(super) async fn serve(channel: OwnedFd, allowed: Arc<Allowed>, stop: CancellationToken) {
    let listener = tokio::select! {
        l = receive_listener(channel) => l,
        _ = stop.cancelled() => return,
        _ = tokio::time::sleep(LISTENER_TIMEOUT) => {
            tracing::warn!("the install jail sent no proxy listener");
            return;
        }
    };
    let listener = match listener {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(error = %e, "no proxy listener from the install jail");
            return;
        }
    };
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let tasks = tokio_util::task::TaskTracker::new();
    loop {
        let (conn, permit) = tokio::select! {
            _ = stop.cancelled() => break,
            permit = slots.clone().acquire_owned() => {
                let Ok(permit) = permit else { break };
                match listener.accept().await {
                    Ok((conn, _)) => (conn, permit),
                    Err(e) => {
                        tracing::debug!(error = %e, "proxy accept failed");
                        continue;
                    }
                }
            }
        };
        let (allowed, stop) = (allowed.clone(), stop.clone());
        tasks.spawn(async move {
            tokio::select! {
                _ = handle(conn, &allowed) => {}
                _ = stop.cancelled() => {}
            }
            drop(permit);
        });
    }
    tasks.close();
}

/// The listening socket the jail's init sent (SCM_RIGHTS).
async fn receive_listener(channel: OwnedFd) -> std::io::Result<TcpListener> {
    let stream = std::os::unix::net::UnixStream::from(channel);
    stream.set_nonblocking(true)?;
    let stream = tokio::net::UnixStream::from_std(stream)?;
    loop {
        stream.readable().await?;
        match stream.try_io(tokio::io::Interest::READABLE, || {
            recv_fd(stream.as_raw_fd())
        }) {
            Ok(fd) => {
                let l = std::net::TcpListener::from(fd);
                l.set_nonblocking(true)?;
                return TcpListener::from_std(l);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
}

fn recv_fd(sock: RawFd) -> std::io::Result<OwnedFd> {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
    let mut byte = [0u8; 1];
    let mut iov = [std::io::IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!([RawFd; 1]);
    let msg = recvmsg::<()>(
        sock,
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC | MsgFlags::MSG_DONTWAIT,
    )
    .map_err(std::io::Error::from)?;
    let mut got = None;
    for c in msg.cmsgs().map_err(std::io::Error::from)? {
        if let ControlMessageOwned::ScmRights(fds) = c {
            for fd in fds {
                // SAFETY: the kernel just installed this fd for us; we own it.
                let owned = unsafe { OwnedFd::from_raw_fd(fd) };
                if got.is_none() {
                    got = Some(owned);
                }
            }
        }
    }
    if msg.bytes == 0 && got.is_none() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the jail closed the proxy channel",
        ));
    }
    let fd = got.ok_or_else(|| std::io::Error::other("a message without a listener"))?;
    is_listening_tcp(&fd)?;
    Ok(fd)
}

/// The fd must be a listening TCP socket, whatever the jail's init sent.
fn is_listening_tcp(fd: &OwnedFd) -> std::io::Result<()> {
    use nix::sys::socket::{getsockopt, sockopt};
    let listening = getsockopt(fd, sockopt::AcceptConn).map_err(std::io::Error::from)?;
    let ty = getsockopt(fd, sockopt::SockType).map_err(std::io::Error::from)?;
    if !listening || ty != nix::sys::socket::SockType::Stream {
        return Err(std::io::Error::other(
            "the proxy channel carried something other than a listening TCP socket",
        ));
    }
    Ok(())
}

/// One client connection: read its head, then relay or refuse.
async fn handle(mut conn: TcpStream, allowed: &Allowed) {
    let head = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut conn)).await {
        Ok(Ok(h)) => h,
        Ok(Err(why)) => return reply(&mut conn, 400, "Bad Request", why).await,
        Err(_) => return reply(&mut conn, 408, "Request Timeout", "no request head").await,
    };
    let req = match Request::parse(&head.bytes) {
        Ok(r) => r,
        Err(why) => return reply(&mut conn, 400, "Bad Request", why).await,
    };
    if !allowed.permits(&req.host, req.port) {
        tracing::info!(host = %req.host, port = req.port, "install jail: refused a connection");
        let why = format!(
            "prims: environment builds may reach only the package index hosts ({}); {}:{} is not one of them",
            allowed.describe(),
            req.host,
            req.port
        );
        return reply(&mut conn, 403, "Forbidden", &why).await;
    }
    let upstream = match tokio::time::timeout(
        CONNECT_TIMEOUT,
        TcpStream::connect((req.host.as_str(), req.port)),
    )
    .await
    {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            let why = format!("prims: cannot reach {}:{}: {e}", req.host, req.port);
            return reply(&mut conn, 502, "Bad Gateway", &why).await;
        }
        Err(_) => {
            let why = format!("prims: {}:{} did not answer in time", req.host, req.port);
            return reply(&mut conn, 504, "Gateway Timeout", &why).await;
        }
    };
    let mut upstream = upstream;
    let first: Vec<u8> = match &req.forward {
        None => {
            let ok = b"HTTP/1.1 200 Connection established\r\n\r\n";
            if conn.write_all(ok).await.is_err() {
                return;
            }
            head.rest
        }
        Some(rewritten) => {
            let mut v = rewritten.clone();
            v.extend_from_slice(&head.rest);
            v
        }
    };
    if !first.is_empty() && upstream.write_all(&first).await.is_err() {
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut conn, &mut upstream).await;
}

struct Head {
    bytes: Vec<u8>,
    /// What arrived after the head.
    rest: Vec<u8>,
}

async fn read_head(conn: &mut TcpStream) -> Result<Head, &'static str> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        let n = conn.read(&mut chunk).await.map_err(|_| "read failed")?;
        if n == 0 {
            return Err("the connection closed before the request head ended");
        }
        let from = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(at) = find(&buf[from..], b"\r\n\r\n") {
            let end = from + at + 4;
            let rest = buf.split_off(end);
            return Ok(Head { bytes: buf, rest });
        }
        if buf.len() > MAX_HEAD {
            return Err("the request head is too large");
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

async fn reply(conn: &mut TcpStream, code: u16, reason: &str, body: &str) {
    let msg = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = conn.write_all(msg.as_bytes()).await;
    let _ = conn.shutdown().await;
}

/// A proxy request: where it goes, and for plain HTTP the head to send on.
#[derive(Debug, PartialEq, Eq)]
struct Request {
    host: String,
    port: u16,
    /// None for CONNECT; else the head rewritten to origin-form.
    forward: Option<Vec<u8>>,
}

impl Request {
    fn parse(head: &[u8]) -> Result<Request, &'static str> {
        let text = std::str::from_utf8(head).map_err(|_| "the request head is not UTF-8")?;
        let mut lines = text.split("\r\n");
        let first = lines.next().ok_or("empty request")?;
        let mut parts = first.split(' ');
        let (Some(method), Some(target), Some(version), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err("malformed request line");
        };
        if !matches!(version, "HTTP/1.1" | "HTTP/1.0") {
            return Err("only HTTP/1.x is proxied");
        }
        if !method.bytes().all(|b| b.is_ascii_uppercase()) || method.is_empty() {
            return Err("malformed method");
        }
        if method == "CONNECT" {
            let (host, port) = split_host_port(target, None)?;
            return Ok(Request {
                host,
                port,
                forward: None,
            });
        }
        let rest = target
            .strip_prefix("http://")
            .ok_or("only CONNECT and absolute http:// requests are proxied")?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if authority.contains('@') {
            return Err("credentials in the URL are not proxied");
        }
        let (host, port) = split_host_port(authority, Some(80))?;
        let mut out = format!("{method} {path} {version}\r\n");
        for line in lines {
            if line.is_empty() {
                break;
            }
            let name = line.split(':').next().unwrap_or("").to_ascii_lowercase();
            if name.starts_with("proxy-") {
                continue;
            }
            out.push_str(line);
            out.push_str("\r\n");
        }
        out.push_str("\r\n");
        Ok(Request {
            host,
            port,
            forward: Some(out.into_bytes()),
        })
    }
}

/// `host:port`, `[v6]:port`, or a bare host with a default port.
fn split_host_port(s: &str, default: Option<u16>) -> Result<(String, u16), &'static str> {
    let (host, port) = if let Some(v6) = s.strip_prefix('[') {
        let (h, after) = v6.split_once(']').ok_or("malformed IPv6 host")?;
        match after.strip_prefix(':') {
            Some(p) => (h, Some(p)),
            None if after.is_empty() => (h, None),
            None => return Err("malformed host"),
        }
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        }
    };
    let port = match port {
        Some(p) => p.parse::<u16>().map_err(|_| "malformed port")?,
        None => default.ok_or("CONNECT needs host:port")?,
    };
    let ok = !host.is_empty()
        && host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':'));
    if !ok || port == 0 {
        return Err("malformed host");
    }
    Ok((host.to_ascii_lowercase(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_and_absolute_requests_parse() {
        let r =
            Request::parse(b"CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n").unwrap();
        assert_eq!(
            (r.host.as_str(), r.port, r.forward),
            ("pypi.org", 443, None)
        );
        let r = Request::parse(
            b"GET http://127.0.0.1:8080/simple/six/ HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nProxy-Connection: keep-alive\r\nAccept: */*\r\n\r\n",
        )
        .unwrap();
        assert_eq!((r.host.as_str(), r.port), ("127.0.0.1", 8080));
        let fwd = String::from_utf8(r.forward.unwrap()).unwrap();
        assert_eq!(
            fwd,
            "GET /simple/six/ HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAccept: */*\r\n\r\n"
        );
        let r = Request::parse(b"CONNECT [::1]:8443 HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!((r.host.as_str(), r.port), ("::1", 8443));
    }

    #[test]
    fn junk_is_refused() {
        for bad in [
            &b"CONNECT pypi.org HTTP/1.1\r\n\r\n"[..],
            b"GET /relative HTTP/1.1\r\n\r\n",
            b"GET https://pypi.org/ HTTP/1.1\r\n\r\n",
            b"GET http://user:pw@host/ HTTP/1.1\r\n\r\n",
            b"CONNECT a b:1 HTTP/1.1\r\n\r\n",
            b"CONNECT host:0 HTTP/1.1\r\n\r\n",
            b"CONNECT host:99999 HTTP/1.1\r\n\r\n",
            b"CONNECT ho/st:80 HTTP/1.1\r\n\r\n",
            b"CONNECT host:80 HTTP/2\r\n\r\n",
            b"\xff\xfe\r\n\r\n",
        ] {
            assert!(
                Request::parse(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
