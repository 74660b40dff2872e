//! Optional bearer tokens mapped to tenants. With no token configured every
//! request passes as tenant `None`; otherwise a request without a valid
//! `Authorization: Bearer` gets 401 with `WWW-Authenticate: Bearer`.

use crate::config::TokenEntry;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{header, HeaderValue, StatusCode};
use std::sync::Arc;

/// The tenant a request authenticated as (request extension).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Tenant(pub Option<String>);

#[derive(Debug, Default)]
pub(crate) struct Auth {
    tokens: Vec<TokenEntry>,
}

impl Auth {
    pub(crate) fn new(tokens: Vec<TokenEntry>) -> Auth {
        Auth { tokens }
    }

    fn enabled(&self) -> bool {
        !self.tokens.is_empty()
    }

    /// The tenant of `token`, comparing every configured token in constant time.
    fn tenant_of(&self, token: &str) -> Option<&str> {
        let mut found = None;
        for t in &self.tokens {
            if ct_eq(t.token.as_bytes(), token.as_bytes()) {
                found = Some(t.tenant.as_str());
            }
        }
        found
    }
}

fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn bearer(req: &Request) -> Option<&str> {
    let value = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

fn unauthorized(present: bool) -> Response {
    let challenge = if present {
        "Bearer realm=\"prims\", error=\"invalid_token\""
    } else {
        "Bearer realm=\"prims\""
    };
    let mut resp = (
        StatusCode::UNAUTHORIZED,
        "Unauthorized: send Authorization: Bearer <token>\n",
    )
        .into_response();
    resp.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static(challenge),
    );
    resp
}

/// axum middleware: authenticate, then tag the request with its [`Tenant`].
pub(crate) async fn authenticate(
    State(auth): State<Arc<Auth>>,
    mut req: Request,
    next: Next,
) -> Response {
    let tenant = if auth.enabled() {
        let token = bearer(&req);
        match token.and_then(|t| auth.tenant_of(t)) {
            Some(t) => Some(t.to_owned()),
            None => {
                tracing::info!(path = %req.uri().path(), "refused a request without a valid token");
                return unauthorized(req.headers().contains_key(header::AUTHORIZATION));
            }
        }
    } else {
        None
    };
    req.extensions_mut().insert(Tenant(tenant));
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_map_to_tenants() {
        let auth = Auth::new(vec![
            TokenEntry {
                token: "aaaaaaaaaaaaaaaa".into(),
                tenant: "a".into(),
            },
            TokenEntry {
                token: "bbbbbbbbbbbbbbbb".into(),
                tenant: "b".into(),
            },
        ]);
        assert_eq!(auth.tenant_of("bbbbbbbbbbbbbbbb"), Some("b"));
        assert_eq!(auth.tenant_of("bbbbbbbbbbbbbbb"), None);
        assert_eq!(auth.tenant_of(""), None);
    }
}
