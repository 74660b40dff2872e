//! Errors of outbound HTTP, worded so a model can act on them.

use std::error::Error as StdError;
use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum EgressError {
    #[error("{url:?} is not a usable URL: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("only http:// and https:// URLs are supported, not {scheme}://")]
    SchemeNotAllowed { scheme: String },
    #[error("{}", Blocked::describe(host, *addr, why))]
    Blocked {
        host: String,
        /// The refused address; `None` when the name itself is refused.
        addr: Option<IpAddr>,
        why: &'static str,
    },
    #[error("the transfer exceeds the size limit of {limit} bytes")]
    TooLarge { limit: u64 },
    #[error("the transfer timed out after {after:?}; try a smaller file or a faster server")]
    Timeout { after: Duration },
    /// An upload answered with a status that is not success.
    #[error("Upload failed with HTTP {status}")]
    Status { status: u16 },
    /// A download answered with a status that is not success.
    #[error("Download failed with HTTP {status}")]
    DownloadStatus { status: u16 },
    #[error("more than {max} redirects; use the final URL directly")]
    TooManyRedirects { max: usize },
    #[error("the server redirected to an unusable location: {reason}")]
    BadRedirect { reason: String },
    #[error("{content_type:?} is not a valid Content-Type header value")]
    BadContentType { content_type: String },
    /// `next_chunk` after the download failed.
    #[error("the download already failed; start it again")]
    Aborted,
    #[error("HTTP request failed: {}", chain(.0))]
    Http(#[source] reqwest::Error),
    #[error("could not set up the HTTP client: {0}")]
    Client(String),
}

/// The resolver's refusal; it travels through reqwest as the source of a
/// connect error and becomes [`EgressError::Blocked`] again.
#[derive(Debug, Clone)]
pub(crate) struct Blocked {
    pub(crate) host: String,
    pub(crate) addr: Option<IpAddr>,
    pub(crate) why: &'static str,
}

impl Blocked {
    pub(crate) fn new(host: &str, addr: Option<IpAddr>, why: &'static str) -> Self {
        Blocked {
            host: host.to_string(),
            addr,
            why,
        }
    }

    fn describe(host: &str, addr: Option<IpAddr>, why: &str) -> String {
        let literal = host.trim_matches(['[', ']']).parse::<IpAddr>().is_ok();
        let subject = match addr {
            Some(ip) if literal => format!("{ip} is"),
            Some(ip) => format!("{host} resolves to {ip}, which is"),
            None => format!("{host} is"),
        };
        format!(
            "refused: {subject} not on the public internet ({why}); only public hosts \
             can be reached (an administrator can add exceptions to egress.allow in the policy)"
        )
    }
}

impl fmt::Display for Blocked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&Blocked::describe(&self.host, self.addr, self.why))
    }
}

impl StdError for Blocked {}

impl From<Blocked> for EgressError {
    fn from(b: Blocked) -> Self {
        EgressError::Blocked {
            host: b.host,
            addr: b.addr,
            why: b.why,
        }
    }
}

impl EgressError {
    /// Maps a reqwest error, recovering the guard's refusal from the chain.
    pub(crate) fn from_reqwest(e: reqwest::Error, timeout: Duration) -> Self {
        let mut source: Option<&(dyn StdError + 'static)> = Some(&e);
        while let Some(err) = source {
            if let Some(b) = err.downcast_ref::<Blocked>() {
                return b.clone().into();
            }
            source = err.source();
        }
        if e.is_timeout() {
            return EgressError::Timeout { after: timeout };
        }
        // Without the URL: a presigned one carries its signature.
        EgressError::Http(e.without_url())
    }
}

/// An error and its causes, "a: b: c", without repeating a cause that the
/// previous message already ends with.
fn chain(e: &dyn StdError) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(err) = source {
        let msg = err.to_string();
        if !out.ends_with(&msg) {
            out.push_str(": ");
            out.push_str(&msg);
        }
        source = err.source();
    }
    out
}
