//! Stopping a long-running subcommand on SIGINT or SIGTERM.

use tokio_util::sync::CancellationToken;

/// Cancel `token` on SIGINT or SIGTERM. The handlers are in place when this
/// returns (it must be called inside a runtime).
pub fn stop_on_signals(token: &CancellationToken) {
    use tokio::signal::unix::{signal, SignalKind};
    for kind in [SignalKind::interrupt(), SignalKind::terminate()] {
        match signal(kind) {
            Ok(mut s) => {
                let stop = token.clone();
                tokio::spawn(async move {
                    s.recv().await;
                    stop.cancel();
                });
            }
            Err(e) => tracing::warn!(error = %e, "cannot catch a stop signal"),
        }
    }
}
