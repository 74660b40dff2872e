//! stdout and stderr of a run, forwarded to the client while it runs:
//! as progress notifications when the request carries a progress token, and
//! as log notifications when the client asked for a log level that admits
//! them (stdout is `info`, stderr `warning`). Output is coalesced: at most
//! one flush per [`INTERVAL`].
#![allow(deprecated)] // MCP logging is deprecated by SEP-2577 but still what clients read.

use prims_protocol::wire::OutputStream;
use rmcp::model::{
    LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken,
};
use rmcp::{Peer, RoleServer};
use std::time::Duration;
use tokio::time::Instant;

/// Minimum time between two flushes of one call.
const INTERVAL: Duration = Duration::from_millis(100);

pub(crate) struct Streamer {
    peer: Peer<RoleServer>,
    progress: Option<ProgressToken>,
    log: Option<LoggingLevel>,
    out: Vec<u8>,
    err: Vec<u8>,
    /// Bytes forwarded so far: the (increasing) progress value.
    sent: u64,
    last: Option<Instant>,
}

fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// The longest valid UTF-8 text at the front of `buf`, removed from it; an
/// incomplete character at the end waits for the next chunk unless `all`.
fn take_text(buf: &mut Vec<u8>, all: bool) -> String {
    let cut = match std::str::from_utf8(buf) {
        Ok(_) => buf.len(),
        Err(e) if e.error_len().is_none() && !all => e.valid_up_to(),
        Err(_) => buf.len(),
    };
    let rest = buf.split_off(cut);
    let text = String::from_utf8_lossy(buf).into_owned();
    *buf = rest;
    text
}

impl Streamer {
    /// `None` when the client asked for neither progress nor logs.
    pub(crate) fn new(
        peer: Peer<RoleServer>,
        progress: Option<ProgressToken>,
        log: Option<LoggingLevel>,
    ) -> Option<Streamer> {
        (progress.is_some() || log.is_some()).then(|| Streamer {
            peer,
            progress,
            log,
            out: Vec::new(),
            err: Vec::new(),
            sent: 0,
            last: None,
        })
    }

    fn logs(&self, level: LoggingLevel) -> bool {
        self.log.is_some_and(|min| rank(level) >= rank(min))
    }

    pub(crate) fn push(&mut self, stream: OutputStream, data: &[u8]) {
        match stream {
            OutputStream::Stdout => self.out.extend_from_slice(data),
            OutputStream::Stderr => self.err.extend_from_slice(data),
        }
    }

    /// When the buffered output is due to be sent, if any is buffered.
    pub(crate) fn due(&self) -> Option<Instant> {
        if self.out.is_empty() && self.err.is_empty() {
            return None;
        }
        Some(self.last.map_or_else(Instant::now, |t| t + INTERVAL))
    }

    /// Send what is buffered; `all` also sends a trailing partial character.
    pub(crate) async fn flush(&mut self, all: bool) {
        let out = take_text(&mut self.out, all);
        let err = take_text(&mut self.err, all);
        if out.is_empty() && err.is_empty() {
            return;
        }
        self.last = Some(Instant::now());
        self.sent += (out.len() + err.len()) as u64;
        if let Some(token) = &self.progress {
            let mut message = out.clone();
            if !err.is_empty() {
                message.push_str(&err);
            }
            let p = ProgressNotificationParam::new(token.clone(), self.sent as f64)
                .with_message(message);
            if let Err(e) = self.peer.notify_progress(p).await {
                tracing::debug!(error = %e, "progress notification not delivered");
            }
        }
        for (text, level, logger) in [
            (out, LoggingLevel::Info, "stdout"),
            (err, LoggingLevel::Warning, "stderr"),
        ] {
            if text.is_empty() || !self.logs(level) {
                continue;
            }
            let p = LoggingMessageNotificationParam::new(level, serde_json::Value::String(text))
                .with_logger(logger);
            if let Err(e) = self.peer.notify_logging_message(p).await {
                tracing::debug!(error = %e, "log notification not delivered");
            }
        }
    }

    /// A status line (queued, building an environment) sent at once.
    pub(crate) async fn status(&mut self, message: String) {
        if let Some(token) = &self.progress {
            let p = ProgressNotificationParam::new(token.clone(), self.sent as f64)
                .with_message(message.clone());
            let _ = self.peer.notify_progress(p).await;
        }
        if self.logs(LoggingLevel::Info) {
            let p = LoggingMessageNotificationParam::new(
                LoggingLevel::Info,
                serde_json::Value::String(message),
            )
            .with_logger("prims");
            let _ = self.peer.notify_logging_message(p).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_characters_wait_for_the_rest() {
        let mut buf = "héllo".as_bytes().to_vec();
        let tail = buf.split_off(2); // inside 'é'
        assert_eq!(take_text(&mut buf, false), "h");
        buf.extend_from_slice(&tail);
        assert_eq!(take_text(&mut buf, false), "éllo");
        let mut bad = vec![b'a', 0xff, b'b'];
        assert_eq!(take_text(&mut bad, false), "a\u{fffd}b");
    }
}
