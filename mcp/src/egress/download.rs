//! A download in progress: the body is read chunk by chunk, and the size
//! limit is applied to the running total, so an endless body costs at most
//! the limit.

use super::error::EgressError;
use bytes::Bytes;
use reqwest::{Response, Url};
use std::time::Duration;

/// A download whose headers have arrived; read the body with
/// [`Download::next_chunk`].
#[derive(Debug)]
pub struct Download {
    /// The URL the body came from, after redirects.
    pub url: String,
    pub content_length: Option<u64>,
    pub content_type: Option<String>,
    pub(super) response: Response,
    pub(super) received: u64,
    pub(super) limit: u64,
    pub(super) timeout: Duration,
    pub(super) failed: bool,
}

impl Download {
    /// The next piece of the body, or `None` at its end. Fails with
    /// [`EgressError::TooLarge`] as soon as the running total passes the
    /// limit, and keeps failing after any error.
    pub async fn next_chunk(&mut self) -> Result<Option<Bytes>, EgressError> {
        if self.failed {
            return Err(EgressError::Aborted);
        }
        let chunk = match self.response.chunk().await {
            Ok(chunk) => chunk,
            Err(e) => {
                self.failed = true;
                return Err(EgressError::from_reqwest(e, self.timeout));
            }
        };
        let Some(chunk) = chunk else {
            tracing::debug!(url = %self.url_for_logs(), bytes = self.received, "egress: download complete");
            return Ok(None);
        };
        self.received = self.received.saturating_add(chunk.len() as u64);
        if self.received > self.limit {
            self.failed = true;
            tracing::info!(url = %self.url_for_logs(), limit = self.limit, "egress: download cut off");
            return Err(EgressError::TooLarge { limit: self.limit });
        }
        Ok(Some(chunk))
    }

    fn url_for_logs(&self) -> String {
        Url::parse(&self.url).map_or_else(|_| String::new(), |u| Redacted(&u).to_string())
    }

    /// The most body bytes this download may bring (`egress.max_download`).
    pub(crate) fn limit(&self) -> u64 {
        self.limit
    }

    /// Body bytes received so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Reads the whole body into memory (still bounded by the size limit).
    pub async fn bytes(mut self) -> Result<Vec<u8>, EgressError> {
        let mut out = Vec::new();
        while let Some(chunk) = self.next_chunk().await? {
            out.extend_from_slice(&chunk);
        }
        Ok(out)
    }
}

/// A URL for logs: scheme, host, port and path, without the query (a
/// presigned URL's signature) or credentials.
pub(super) struct Redacted<'a>(pub(super) &'a Url);

impl std::fmt::Display for Redacted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let u = self.0;
        let host = u.host_str().unwrap_or_default();
        match u.port() {
            Some(port) => write!(f, "{}://{host}:{port}{}", u.scheme(), u.path()),
            None => write!(f, "{}://{host}{}", u.scheme(), u.path()),
        }
    }
}
