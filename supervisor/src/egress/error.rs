//! What can go wrong between the supervisor and the proxy process.

use std::time::Duration;

/// How long the proxy may take to answer the start or end of a run (a
/// process that hangs is replaced sooner, by its link's watchdog).
pub(super) const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum EgressError {
    #[error("starting the egress proxy ({exe}): {source}")]
    Start {
        exe: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the egress proxy's control channel: {0}")]
    Channel(#[source] std::io::Error),
    #[error("the egress proxy did not start the run within {ANSWER_TIMEOUT:?}")]
    NoAnswer,
    #[error("the egress proxy ended while it started the run")]
    Ended,
}
