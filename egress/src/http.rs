//! The proxy's side of HTTP: a client's request head (read with a size cap
//! and parsed as hostile input), and the proxy's own short replies. Only the
//! head is parsed; after a `CONNECT` the bytes are relayed unread (TLS end
//! to end), and a plain-HTTP request is passed on with its request line made
//! origin-form, its `Host` written from its target and its `Proxy-*`
//! headers dropped. A head the upstream could read as another request than
//! the one judged is refused ([`crate::headers`]).

use crate::headers::{self, Field};
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

/// Why a request head is not served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// Not a request the proxy can read: it names no target to record.
    #[error("{0}")]
    Malformed(&'static str),
    /// A readable request for `host:port` that the proxy will not pass on
    /// as it stands, since the upstream could read it as another request
    /// (another virtual host, another length) than the one judged.
    #[error("{reason}")]
    Inconsistent {
        host: String,
        port: u16,
        reason: String,
    },
}

impl Request {
    /// Parses `head` (ending with its blank line). A plain-HTTP request is
    /// forwarded with a `Host` the proxy writes from the target, as RFC 9112
    /// section 3.2.2 has a proxy do; a client's own `Host` must name that
    /// same target (a missing port meaning 80), so that a request judged for
    /// one virtual host never reaches another. A request without one gets
    /// it added. On CONNECT a `Host` is optional and, when given, must name
    /// the target host, and its port if it has one.
    pub fn parse(head: &[u8]) -> Result<Request, Refused> {
        use Refused::Malformed;
        let text =
            std::str::from_utf8(head).map_err(|_| Malformed("the request head is not UTF-8"))?;
        let text = text.strip_suffix("\r\n\r\n").unwrap_or(text);
        let mut lines = text.split("\r\n");
        let first = lines.next().ok_or(Malformed("empty request"))?;
        let mut parts = first.split(' ');
        let (Some(method), Some(target), Some(version), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(Malformed("malformed request line"));
        };
        if !matches!(version, "HTTP/1.1" | "HTTP/1.0") {
            return Err(Malformed("only HTTP/1.x is proxied"));
        }
        if !method.bytes().all(|b| b.is_ascii_uppercase()) || method.is_empty() {
            return Err(Malformed("malformed method"));
        }
        let connect = method == "CONNECT";
        let (host, port, path) = if connect {
            let (host, port) = split_host_port(target, None).map_err(Malformed)?;
            (host, port, "")
        } else {
            let rest = target.strip_prefix("http://").ok_or(Malformed(
                "only CONNECT and absolute http:// requests are proxied",
            ))?;
            let (authority, path) = match rest.find('/') {
                Some(i) => (&rest[..i], &rest[i..]),
                None => (rest, "/"),
            };
            if authority.contains('@') {
                return Err(Malformed("credentials in the URL are not proxied"));
            }
            let (host, port) = split_host_port(authority, Some(80)).map_err(Malformed)?;
            (host, port, path)
        };
        let inconsistent = |reason: String| Refused::Inconsistent {
            host: host.clone(),
            port,
            reason,
        };
        let fields = headers::parse(lines).map_err(inconsistent)?;
        check_host(&fields, &host, port, connect).map_err(inconsistent)?;
        // A tunnel's bytes are relayed unread: there is no body to frame.
        if connect {
            return Ok(Request {
                host,
                port,
                forward: None,
            });
        }
        headers::check_framing(&fields, version == "HTTP/1.0").map_err(inconsistent)?;
        let mut out = format!("{method} {path} {version}\r\n");
        let named = match port {
            80 => bracketed(&host),
            _ => authority(&host, port),
        };
        out.push_str(&format!("Host: {named}\r\n"));
        for f in &fields {
            let hop = f
                .name
                .get(..6)
                .is_some_and(|p| p.eq_ignore_ascii_case("proxy-"));
            if hop || f.is("host") || f.is("connection") || f.is("keep-alive") {
                continue;
            }
            out.push_str(&format!("{}: {}\r\n", f.name, f.value));
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

/// That the client's `Host`, if it sent one, names the target `host:port`;
/// the error is the reason the request is refused.
fn check_host(fields: &[Field<'_>], host: &str, port: u16, connect: bool) -> Result<(), String> {
    const RULE: &str = "a proxied request's Host must name its target";
    let hosts: Vec<&Field<'_>> = fields.iter().filter(|f| f.is("host")).collect();
    let given = match hosts.as_slice() {
        [] => return Ok(()),
        [one] => one.value,
        more => {
            return Err(format!(
                "the request has {} Host headers ({RULE}, once)",
                more.len()
            ))
        }
    };
    let Ok((h, p)) = split_authority(given) else {
        return Err(format!(
            "the Host header {} is not a host[:port] ({RULE})",
            headers::shown(given)
        ));
    };
    // Without a port, a Host names port 80 (http's); on CONNECT, whose
    // tunnel has no scheme, it names the target's host alone.
    let same_port = p.map_or(connect || port == 80, |p| p == port);
    if h != host || !same_port {
        return Err(format!(
            "the Host header names {}, not the target {} ({RULE})",
            headers::shown(given),
            authority(host, port)
        ));
    }
    Ok(())
}

/// `host:port`, with an IPv6 host in brackets.
fn authority(host: &str, port: u16) -> String {
    format!("{}:{port}", bracketed(host))
}

fn bracketed(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

/// `host:port`, `[v6]:port`, or a bare host with a default port.
fn split_host_port(s: &str, default: Option<u16>) -> Result<(String, u16), &'static str> {
    let (host, port) = split_authority(s)?;
    let port = port.or(default).ok_or("CONNECT needs host:port")?;
    Ok((host, port))
}

/// `host:port`, `[v6]:port` or a bare host: the host lowercased, and the
/// port if one is given.
pub(crate) fn split_authority(s: &str) -> Result<(String, Option<u16>), &'static str> {
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
        Some(p) => match p.parse::<u16>() {
            Ok(0) | Err(_) => return Err("malformed port"),
            Ok(p) => Some(p),
        },
        None => None,
    };
    let ok = !host.is_empty()
        && host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':'));
    if !ok {
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
                matches!(Request::parse(bad), Err(Refused::Malformed(_))),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    /// The reason `head` is refused, checking that it names the target.
    fn refused(head: &str, host: &str, port: u16) -> String {
        match Request::parse(head.as_bytes()) {
            Err(Refused::Inconsistent {
                host: h,
                port: p,
                reason,
            }) => {
                assert_eq!((h.as_str(), p), (host, port), "{head:?}");
                reason
            }
            other => panic!("{head:?}: {other:?}"),
        }
    }

    fn forwarded(head: &str) -> String {
        let r = Request::parse(head.as_bytes()).unwrap_or_else(|e| panic!("{head:?}: {e}"));
        String::from_utf8(r.forward.expect("plain HTTP")).unwrap()
    }

    #[test]
    fn a_host_header_that_names_another_target_is_refused() {
        assert_eq!(
            refused(
                "GET http://allowed.example/ HTTP/1.1\r\nHost: internal.other\r\n\r\n",
                "allowed.example",
                80
            ),
            "the Host header names \"internal.other\", not the target allowed.example:80 (a proxied request's Host must name its target)"
        );
        assert_eq!(
            refused(
                "GET http://allowed.example/ HTTP/1.1\r\nHost: allowed.example\r\nhost: allowed.example\r\n\r\n",
                "allowed.example",
                80
            ),
            "the request has 2 Host headers (a proxied request's Host must name its target, once)"
        );
        // A Host without a port names port 80.
        let other_port = "not the target a.example:8080";
        for (head, why) in [
            (
                "GET http://a.example:8080/ HTTP/1.1\r\nHost: a.example\r\n\r\n",
                other_port,
            ),
            (
                "GET http://a.example:8080/ HTTP/1.1\r\nHost: a.example:8081\r\n\r\n",
                other_port,
            ),
            (
                "GET http://a.example:8080/ HTTP/1.1\r\nHost: b.example:8080\r\n\r\n",
                other_port,
            ),
            (
                "GET http://a.example:8080/ HTTP/1.1\r\nHost: a.example.:8080\r\n\r\n",
                other_port,
            ),
            (
                "GET http://a.example:8080/ HTTP/1.1\r\nHost:\r\n\r\n",
                "\"\" is not a host[:port]",
            ),
            (
                "GET http://a.example:8080/ HTTP/1.1\r\nHost: a.example:8080/x\r\n\r\n",
                "is not a host[:port]",
            ),
            (
                "GET http://a.example:8080/ HTTP/1.1\r\nHost: u@a.example:8080\r\n\r\n",
                "is not a host[:port]",
            ),
        ] {
            let reason = refused(head, "a.example", 8080);
            assert!(reason.contains(why), "{head:?}: {reason}");
        }
        assert!(refused(
            "GET http://[::1]:8080/ HTTP/1.1\r\nHost: [::2]:8080\r\n\r\n",
            "::1",
            8080
        )
        .contains("not the target [::1]:8080"));
        // CONNECT: the Host, when given, names the tunnel's target.
        assert!(refused(
            "CONNECT a.example:443 HTTP/1.1\r\nHost: b.example:443\r\n\r\n",
            "a.example",
            443
        )
        .contains("the Host header names \"b.example:443\", not the target a.example:443"));
        assert!(refused(
            "CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:8443\r\n\r\n",
            "a.example",
            443
        )
        .contains("not the target"));
        assert!(refused(
            "CONNECT a.example:443 HTTP/1.1\r\nHost: a.example\r\nHost: a.example\r\n\r\n",
            "a.example",
            443
        )
        .contains("2 Host headers"));
    }

    #[test]
    fn the_forwarded_host_is_the_proxys_own() {
        // Names compare without case; port 80 may be written or not.
        assert_eq!(
            forwarded(
                "GET http://A.Example/x?q=1 HTTP/1.1\r\nhost: a.EXAMPLE:80\r\nAccept: */*\r\n\r\n"
            ),
            "GET /x?q=1 HTTP/1.1\r\nHost: a.example\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
        assert_eq!(
            forwarded("GET http://a.example:80 HTTP/1.1\r\nHost: a.example\r\n\r\n"),
            "GET / HTTP/1.1\r\nHost: a.example\r\nConnection: close\r\n\r\n"
        );
        // A request without one gets it, first.
        assert_eq!(
            forwarded("GET http://a.example:8080/ HTTP/1.0\r\nAccept: x\r\n\r\n"),
            "GET / HTTP/1.0\r\nHost: a.example:8080\r\nAccept: x\r\nConnection: close\r\n\r\n"
        );
        assert_eq!(
            forwarded("POST http://[::1]:8080/p HTTP/1.1\r\nContent-Length: 2\r\nHost: [::1]:8080\r\n\r\n"),
            "POST /p HTTP/1.1\r\nHost: [::1]:8080\r\nContent-Length: 2\r\nConnection: close\r\n\r\n"
        );
        // CONNECT: a Host without a port names the target host; none at all is fine.
        for head in [
            "CONNECT a.example:443 HTTP/1.1\r\nHost: a.example\r\n\r\n",
            "CONNECT a.example:443 HTTP/1.1\r\nHost: A.example:443\r\n\r\n",
            "CONNECT a.example:443 HTTP/1.0\r\n\r\n",
        ] {
            let r = Request::parse(head.as_bytes()).unwrap_or_else(|e| panic!("{head:?}: {e}"));
            assert_eq!(
                (r.host.as_str(), r.port, r.forward),
                ("a.example", 443, None)
            );
        }
    }

    #[test]
    fn heads_the_upstream_could_read_otherwise_are_refused_with_their_target() {
        for (head, why) in [
            // A bare LF: a lenient server sees a second Host the proxy did not.
            (
                "GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\nX: 1\nHost: evil.example\r\n\r\n",
                "bare CR or LF",
            ),
            (
                "GET http://a.example/ HTTP/1.1\r\nHost : evil.example\r\nHost: a.example\r\n\r\n",
                "whitespace between the header name \"Host\" and its colon",
            ),
            (
                "GET http://a.example/ HTTP/1.1\r\nX: 1\r\n Host: evil.example\r\n\r\n",
                "folded",
            ),
            (
                "POST http://a.example/ HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n",
                "both Transfer-Encoding and Content-Length",
            ),
            (
                "POST http://a.example/ HTTP/1.1\r\nContent-Length: 4\r\nContent-Length: 40\r\n\r\n",
                "2 Content-Length headers",
            ),
            (
                "CONNECT a.example:80 HTTP/1.1\r\nHost: a.example\r\nX: 1\nY: 2\r\n\r\n",
                "bare CR or LF",
            ),
        ] {
            let reason = refused(head, "a.example", 80);
            assert!(reason.contains(why), "{head:?}: {reason}");
        }
    }
}
