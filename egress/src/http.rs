//! The proxy's side of HTTP: a client's request head (read with a size cap
//! and parsed as hostile input), and the proxy's own short replies. Only the
//! head is parsed; after a `CONNECT` the bytes are relayed unread (TLS end
//! to end), and a plain-HTTP request is passed on with its request line made
//! origin-form and its `Proxy-*` headers dropped.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The largest request head read.
pub const MAX_HEAD: usize = 16 * 1024;

pub struct Head {
    pub bytes: Vec<u8>,
    /// What arrived after the head.
    pub rest: Vec<u8>,
}

pub async fn read_head(conn: &mut (impl AsyncRead + Unpin)) -> Result<Head, &'static str> {
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

pub async fn reply(conn: &mut (impl AsyncWrite + Unpin), code: u16, reason: &str, body: &str) {
    let msg = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = conn.write_all(msg.as_bytes()).await;
    let _ = conn.shutdown().await;
}

/// A proxy request: where it goes, and for plain HTTP the head to send on.
#[derive(Debug, PartialEq, Eq)]
pub struct Request {
    pub host: String,
    pub port: u16,
    /// None for CONNECT; else the head rewritten to origin-form.
    pub forward: Option<Vec<u8>>,
}

impl Request {
    pub fn parse(head: &[u8]) -> Result<Request, &'static str> {
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
            if name.starts_with("proxy-") || name == "connection" || name == "keep-alive" {
                continue;
            }
            out.push_str(line);
            out.push_str("\r\n");
        }
        // One request per connection: the bytes after this request are
        // relayed unread, so a client that reused the connection for
        // another host would reach this one instead.
        out.push_str("Connection: close\r\n\r\n");
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
            "GET /simple/six/ HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAccept: */*\r\nConnection: close\r\n\r\n"
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
