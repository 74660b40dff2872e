//! The listening socket: safe creation, the accept loop, peer checks and the
//! connection limits, and a graceful end on shutdown.

use super::budget::FrameBudget;
use super::config::{ServerConfig, ServerError};
use super::connection::Connection;
use super::handler::Handler;
use super::peer::Peer;
use super::slots::Slots;
use crate::accounts::NOBODY_UID;
use nix::fcntl::AT_FDCWD;
use nix::sys::stat::{fchmodat, FchmodatFlags, Mode};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How long shutdown waits for connections and requests to wind down.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// Pause after a failed accept (e.g. out of fds) so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Listen on `cfg.socket` until `shutdown` is cancelled, answering requests
/// with `handler`. Returns once connections have closed (or after a grace
/// period) and the socket file is removed.
pub async fn serve<H: Handler>(
    cfg: ServerConfig,
    handler: Arc<H>,
    shutdown: CancellationToken,
) -> Result<(), ServerError> {
    if cfg.allowed_uids.contains(&NOBODY_UID) {
        tracing::warn!(
            uid = NOBODY_UID,
            "nobody is listed as allowed and will be refused anyway: give the front-end a user of its own"
        );
    }
    let (listener, identity) = bind(&cfg).await?;
    // Under systemd (Type=notify) clients may connect from here on; the
    // daemon says READY=1 once what a first call needs is up. Without
    // NOTIFY_SOCKET this does nothing.
    if let Err(e) = sd_notify::notify(
        false,
        &[sd_notify::NotifyState::Status("accepting connections")],
    ) {
        tracing::warn!(error = %e, "could not tell systemd the supervisor listens");
    }
    let limits = cfg.limits.clone();
    let slots = Slots::new(limits.max_connections, limits.max_connections_per_uid);
    let budget = FrameBudget::new(limits.frame_allowance, limits.partial_frame_budget);
    let tracker = TaskTracker::new();
    loop {
        let stream = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        let peer = match Peer::of(&stream) {
            Ok(peer) => peer,
            Err(e) => {
                tracing::warn!(error = %e, "refused connection: no peer credentials");
                continue;
            }
        };
        if !peer.allowed(&cfg.allowed_uids) {
            tracing::warn!(
                uid = peer.uid,
                pid = peer.pid,
                "refused connection: uid not allowed"
            );
            continue;
        }
        let slot = match slots.claim(peer.uid) {
            Ok(slot) => slot,
            Err(full) => {
                tracing::warn!(uid = peer.uid, pid = peer.pid, "refused connection: {full}");
                continue;
            }
        };
        let conn = Connection {
            peer,
            handler: handler.clone(),
            limits: limits.clone(),
            budget: budget.clone(),
            token: shutdown.child_token(),
            tracker: tracker.clone(),
        };
        tracker.spawn(async move {
            conn.run(stream).await;
            drop(slot);
        });
    }
    drop(listener);
    remove_if_ours(&cfg.socket, identity);
    tracker.close();
    if tokio::time::timeout(SHUTDOWN_GRACE, tracker.wait())
        .await
        .is_err()
    {
        tracing::warn!("requests still running after the shutdown grace period");
    }
    Ok(())
}

fn io_err<'a>(
    path: &'a Path,
    what: &'static str,
) -> impl FnOnce(std::io::Error) -> ServerError + 'a {
    move |source| ServerError::Io {
        path: path.to_owned(),
        what,
        source,
    }
}

/// Bind the socket, mode 0660 and the configured group, never through a
/// symlink. Returns the listener and the socket's (dev, ino).
async fn bind(cfg: &ServerConfig) -> Result<(UnixListener, (u64, u64)), ServerError> {
    let path = cfg.socket.as_path();
    clear_stale(path).await?;
    // bind() creates the node itself and fails on any existing entry, so a
    // symlink planted after the check cannot redirect it.
    let listener = UnixListener::bind(path).map_err(io_err(path, "bind"))?;
    if let Some(gid) = cfg.socket_group {
        std::os::unix::fs::lchown(path, None, Some(gid)).map_err(io_err(path, "chown"))?;
    }
    fchmodat(
        AT_FDCWD,
        path,
        Mode::from_bits_truncate(0o660),
        FchmodatFlags::NoFollowSymlink,
    )
    .map_err(|e| io_err(path, "chmod")(e.into()))?;
    let meta = std::fs::symlink_metadata(path).map_err(io_err(path, "stat"))?;
    if !meta.file_type().is_socket() {
        return Err(ServerError::NotASocket(path.to_owned()));
    }
    Ok((listener, (meta.dev(), meta.ino())))
}

/// Remove a socket left by a previous run, but only a socket, and only if
/// nobody answers on it.
async fn clear_stale(path: &Path) -> Result<(), ServerError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err(path, "stat")(e)),
    };
    if meta.file_type().is_symlink() {
        return Err(ServerError::Symlink(path.to_owned()));
    }
    if !meta.file_type().is_socket() {
        return Err(ServerError::NotASocket(path.to_owned()));
    }
    match tokio::time::timeout(Duration::from_secs(1), UnixStream::connect(path)).await {
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            tracing::info!(socket = %path.display(), "removing stale socket");
            std::fs::remove_file(path).map_err(io_err(path, "remove stale socket"))
        }
        Ok(Err(e)) => Err(io_err(path, "probe existing socket")(e)),
        // Accepted, or a listener too busy to accept: either way it is alive.
        Ok(Ok(_)) | Err(_) => Err(ServerError::InUse(path.to_owned())),
    }
}

/// Unlink the socket on shutdown unless someone replaced it meanwhile.
fn remove_if_ours(path: &Path, identity: (u64, u64)) {
    let ours = std::fs::symlink_metadata(path).is_ok_and(|m| (m.dev(), m.ino()) == identity);
    if ours {
        if let Err(e) = std::fs::remove_file(path) {
            tracing::warn!(socket = %path.display(), error = %e, "cannot remove the socket");
        }
    }
}
