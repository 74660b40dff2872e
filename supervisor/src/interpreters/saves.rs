//! What a save of a session's globals leaves on record, whoever made it
//! (an idle stop, a graceful stop, an autosave): the session's metadata,
//! written durably, and the background saves' tally.

use super::channel::Named;
use crate::sessions::SessionStore;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::SystemTime;

/// Background saves since the supervisor started, and the CPU their
/// jails spent on them.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub saves: AtomicU64,
    pub cpu_ms: AtomicU64,
}

/// Writes, durably and off the async threads, that session `name`'s
/// globals were saved now, but for `missed`.
pub(super) async fn record(sessions: &Arc<SessionStore>, name: &str, missed: Vec<Named>) {
    let (sessions, name) = (sessions.clone(), name.to_string());
    let at = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let written = tokio::task::spawn_blocking(move || {
        let unsaved = missed.into_iter().map(Into::into).collect();
        sessions
            .record_saved_globals(&name, unsaved, at)
            .map_err(|e| (name, e))
    })
    .await;
    if let Ok(Err((name, e))) = written {
        tracing::warn!(session = %name, error = %e, "could not record a save of its globals");
    }
}
