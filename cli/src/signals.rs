//! Stopping a long-running subcommand on SIGINT or SIGTERM.

use anyhow::{Context, Result};
use std::future::Future;
use tokio_util::sync::CancellationToken;

/// Runs `main` to its end on a multi-threaded runtime, with a token that
/// SIGINT or SIGTERM cancels; the handlers are in place before `main` starts.
pub fn run_until_stopped<T, F>(main: impl FnOnce(CancellationToken) -> F) -> Result<T>
where
    F: Future<Output = Result<T>>,
{
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async move {
        let shutdown = CancellationToken::new();
        stop_on_signals(&shutdown);
        main(shutdown).await
    })
}

/// Like [`run_until_stopped`], with a second token that a second SIGINT
/// or SIGTERM cancels: the first asks for a graceful stop, the second for
/// an immediate one.
pub fn run_until_stopped_twice<T, F>(
    main: impl FnOnce(CancellationToken, CancellationToken) -> F,
) -> Result<T>
where
    F: Future<Output = Result<T>>,
{
    run_until_stopped(|stop| async move {
        let now = CancellationToken::new();
        let second = now.clone();
        let first = stop.clone();
        tokio::spawn(async move {
            first.cancelled().await;
            let again = CancellationToken::new();
            stop_on_signals(&again);
            again.cancelled().await;
            second.cancel();
        });
        main(stop, now).await
    })
}

/// Cancel `token` on SIGINT or SIGTERM. The handlers are in place when this
/// returns (it must be called inside a runtime).
fn stop_on_signals(token: &CancellationToken) {
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
