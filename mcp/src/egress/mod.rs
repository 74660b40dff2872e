//! Outbound HTTP for `mount_file`, `run_code(files=...)` and
//! `persist_artifact`: http and https only, bounded in size and time, at most
//! [`MAX_REDIRECTS`] redirects, and guarded against reaching this host, its
//! networks or a cloud metadata service (see [`classify`]).
//!
//! Redirects are followed here rather than by reqwest so every hop passes
//! the same checks as the first URL; named hosts are checked again by the
//! resolver at connect time, IP literals before the request is made.

mod download;
mod error;
mod resolver;
mod ssrf;

pub use download::Download;
pub use error::EgressError;
pub use prims_egress::guard::{blocked_name, classify};

use bytes::Bytes;
use download::Redacted;
use reqwest::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE, LOCATION};
use reqwest::{Method, Response, StatusCode, Url};
use ssrf::SsrfGuard;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Redirects followed before giving up.
pub const MAX_REDIRECTS: usize = 5;

/// The outbound HTTP client; cheap to clone.
#[derive(Clone)]
pub struct Egress {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Egress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let me = &self.inner;
        f.debug_struct("Egress")
            .field("allow", &me.guard)
            .field("max_download", &me.max_download)
            .field("max_upload", &me.max_upload)
            .field("timeout", &me.timeout)
            .finish()
    }
}

struct Inner {
    client: reqwest::Client,
    guard: Arc<SsrfGuard>,
    max_download: u64,
    max_upload: u64,
    timeout: Duration,
}

/// A finished upload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Uploaded {
    pub status: u16,
    pub bytes: u64,
}

impl Egress {
    pub fn new(policy: &prims_policy::Egress) -> Result<Self, EgressError> {
        let rules = policy
            .allow
            .iter()
            .map(|r| prims_policy::parse_egress_rule(r))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| EgressError::Client(format!("egress.allow: {e}")))?;
        let guard = Arc::new(SsrfGuard::new(rules));
        let timeout = policy.timeout.get();
        let client = reqwest::Client::builder()
            // Proxies would resolve names themselves, past the guard.
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(resolver::GuardedResolver::new(Arc::clone(&guard)))
            .connect_timeout(timeout)
            .timeout(timeout)
            .user_agent(concat!("prims/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| EgressError::Client(e.to_string()))?;
        Ok(Egress {
            inner: Arc::new(Inner {
                client,
                guard,
                max_download: policy.max_download.bytes(),
                max_upload: policy.max_upload.bytes(),
                timeout,
            }),
        })
    }

    /// GETs `url`. The size limit is applied to `Content-Length` here and to
    /// the body as it streams through [`Download::next_chunk`]; the timeout
    /// covers redirects, headers and body.
    pub async fn download(&self, url: &str) -> Result<Download, EgressError> {
        let me = &self.inner;
        let (url, response) = self.send(Method::GET, url, None, "").await?;
        let status = response.status();
        if !status.is_success() {
            tracing::info!(url = %Redacted(&url), status = status.as_u16(), "egress: download refused by server");
            return Err(EgressError::DownloadStatus {
                status: status.as_u16(),
            });
        }
        let content_length = response.content_length();
        if content_length.is_some_and(|n| n > me.max_download) {
            tracing::info!(url = %Redacted(&url), ?content_length, "egress: download too large");
            return Err(EgressError::TooLarge {
                limit: me.max_download,
            });
        }
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        tracing::info!(url = %Redacted(&url), ?content_length, ?content_type, "egress: downloading");
        Ok(Download {
            url: url.to_string(),
            content_length,
            content_type,
            response,
            received: 0,
            limit: me.max_download,
            timeout: me.timeout,
            failed: false,
        })
    }

    /// PUTs `body` with a `Content-Length` (never chunked: presigned S3 URLs
    /// refuse that). Only 307 and 308 redirects, which keep the method and
    /// body, are followed.
    pub async fn upload(
        &self,
        url: &str,
        body: Bytes,
        content_type: &str,
    ) -> Result<Uploaded, EgressError> {
        let bytes = body.len() as u64;
        if bytes > self.inner.max_upload {
            return Err(EgressError::TooLarge {
                limit: self.inner.max_upload,
            });
        }
        let (url, response) = self
            .send(Method::PUT, url, Some(body), content_type)
            .await?;
        let status = response.status().as_u16();
        if !response.status().is_success() {
            tracing::info!(url = %Redacted(&url), status, "egress: upload refused by server");
            return Err(EgressError::Status { status });
        }
        tracing::info!(url = %Redacted(&url), status, bytes, "egress: uploaded");
        Ok(Uploaded { status, bytes })
    }

    /// Sends the request, following redirects with every hop checked again.
    async fn send(
        &self,
        method: Method,
        url: &str,
        body: Option<Bytes>,
        content_type: &str,
    ) -> Result<(Url, Response), EgressError> {
        let me = &self.inner;
        let deadline = Instant::now() + me.timeout;
        let content_type =
            HeaderValue::from_str(content_type).map_err(|_| EgressError::BadContentType {
                content_type: content_type.to_string(),
            })?;
        let mut url = Url::parse(url).map_err(|e| EgressError::BadUrl {
            url: url.to_string(),
            reason: e.to_string(),
        })?;
        for hop in 0..=MAX_REDIRECTS {
            me.guard.check_url(&url).inspect_err(|e| {
                tracing::warn!(url = %Redacted(&url), hop, error = %e, "egress: refused");
            })?;
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(EgressError::Timeout { after: me.timeout });
            }
            let mut req = me
                .client
                .request(method.clone(), url.clone())
                .timeout(remaining);
            if let Some(body) = &body {
                // Explicit, because hyper leaves it out for an empty body; a
                // body of known length is then never sent chunked.
                req = req
                    .header(CONTENT_TYPE, content_type.clone())
                    .header(CONTENT_LENGTH, body.len())
                    .body(body.clone());
            }
            let response = req
                .send()
                .await
                .map_err(|e| EgressError::from_reqwest(e, me.timeout))?;
            let Some(next) = redirect_target(&url, &response, body.is_some())? else {
                return Ok((url, response));
            };
            tracing::debug!(from = %Redacted(&url), to = %Redacted(&next), hop, "egress: redirect");
            url = next;
        }
        Err(EgressError::TooManyRedirects { max: MAX_REDIRECTS })
    }
}

/// Where a redirect response points, if it is one to follow. Uploads follow
/// only 307/308: a 301/302/303 would turn the PUT into a GET and "succeed"
/// without storing anything.
fn redirect_target(url: &Url, r: &Response, upload: bool) -> Result<Option<Url>, EgressError> {
    let follow = match r.status() {
        StatusCode::TEMPORARY_REDIRECT | StatusCode::PERMANENT_REDIRECT => true,
        StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND | StatusCode::SEE_OTHER => !upload,
        _ => false,
    };
    if !follow {
        return Ok(None);
    }
    let bad = |reason: String| EgressError::BadRedirect { reason };
    let location = r
        .headers()
        .get(LOCATION)
        .ok_or_else(|| bad(format!("HTTP {} without a Location header", r.status())))?
        .to_str()
        .map_err(|_| bad("the Location header is not text".to_string()))?;
    url.join(location)
        .map(Some)
        .map_err(|e| bad(format!("{location:?}: {e}")))
}
