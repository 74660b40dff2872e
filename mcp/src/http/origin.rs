//! Host and Origin allow-lists for every route (rmcp checks `/mcp` the same
//! way; doing it here first also covers `/artifacts`, `/metrics` and
//! `/health`, and answers a bad Origin with 403 before authentication).

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{header, StatusCode};
use std::sync::Arc;

/// The Host and Origin headers a request may carry (an empty host list
/// allows any Host).
#[derive(Debug, Clone)]
pub(crate) struct HostOriginCheck {
    hosts: Vec<String>,
    origins: Vec<String>,
}

/// `host` without its port, brackets or case.
fn host_only(authority: &str) -> String {
    let a = authority.trim();
    let host = if let Some(rest) = a.strip_prefix('[') {
        rest.split(']').next().unwrap_or(rest)
    } else if a.matches(':').count() > 1 {
        a // a bare IPv6 address
    } else {
        a.rsplit_once(':').map_or(a, |(h, p)| {
            if p.chars().all(|c| c.is_ascii_digit()) {
                h
            } else {
                a
            }
        })
    };
    host.to_ascii_lowercase()
}

/// (scheme, host, port) of an origin or allow-list entry; port `None` for `*`
/// or absent.
fn split_origin(o: &str) -> Option<(String, String, Option<String>)> {
    let (scheme, rest) = o.trim().split_once("://")?;
    let rest = rest.trim_end_matches('/');
    let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
        let (h, tail) = v6.split_once(']')?;
        (h.to_owned(), tail.strip_prefix(':').map(str::to_owned))
    } else {
        match rest.rsplit_once(':') {
            Some((h, p)) => (h.to_owned(), Some(p.to_owned())),
            None => (rest.to_owned(), None),
        }
    };
    Some((scheme.to_ascii_lowercase(), host.to_ascii_lowercase(), port))
}

impl HostOriginCheck {
    pub(crate) fn new(hosts: Vec<String>, origins: Vec<String>) -> HostOriginCheck {
        HostOriginCheck {
            hosts: hosts.iter().map(|h| host_only(h)).collect(),
            origins,
        }
    }

    fn host_ok(&self, host: &str) -> bool {
        self.hosts.is_empty() || self.hosts.contains(&host_only(host))
    }

    fn origin_ok(&self, origin: &str) -> bool {
        if origin.trim().eq_ignore_ascii_case("null") {
            return self.origins.iter().any(|o| o == "null");
        }
        let Some((scheme, host, port)) = split_origin(origin) else {
            return false;
        };
        let default_port = match scheme.as_str() {
            "http" => Some("80".to_owned()),
            "https" => Some("443".to_owned()),
            _ => None,
        };
        self.origins
            .iter()
            .filter_map(|o| split_origin(o))
            .any(|(s, h, p)| {
                s == scheme
                    && h == host
                    && match p.as_deref() {
                        None | Some("*") => true,
                        Some(p) => Some(p.to_owned()) == port.clone().or(default_port.clone()),
                    }
            })
    }
}

fn forbidden(what: &str) -> Response {
    (
        StatusCode::FORBIDDEN,
        format!("Forbidden: {what} header is not allowed\n"),
    )
        .into_response()
}

pub(crate) async fn check(
    State(allowed): State<Arc<HostOriginCheck>>,
    req: Request,
    next: Next,
) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or_else(|| req.uri().authority().map(|a| a.to_string()));
    if let Some(h) = host.as_deref() {
        if !allowed.host_ok(h) {
            tracing::warn!(host = h, "refused a request for a host not allowed");
            return forbidden("Host");
        }
    }
    if let Some(origin) = req.headers().get(header::ORIGIN) {
        let ok = origin.to_str().is_ok_and(|o| allowed.origin_ok(o));
        if !ok {
            tracing::warn!(?origin, "refused a request from an origin not allowed");
            return forbidden("Origin");
        }
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_and_origins() {
        let g = HostOriginCheck::new(
            vec!["localhost".into(), "127.0.0.1".into(), "::1".into()],
            vec![
                "http://localhost:*".into(),
                "https://app.example.com:443".into(),
            ],
        );
        assert!(g.host_ok("127.0.0.1:9000") && g.host_ok("[::1]:9000") && g.host_ok("LOCALHOST"));
        assert!(!g.host_ok("evil.example:9000"));
        assert!(g.origin_ok("http://localhost:6274"));
        assert!(g.origin_ok("https://app.example.com"));
        assert!(!g.origin_ok("https://app.example.com:8443"));
        assert!(!g.origin_ok("http://evil.example"));
        assert!(!g.origin_ok("null"));
        assert!(!g.origin_ok("garbage"));
    }
}
