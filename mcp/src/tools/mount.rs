//! `mount_file` and `run_code`'s `files[]`: download a URL (through the
//! egress guard) and stream it to the supervisor, which writes it read-only
//! under `mounts/`, with or without a Content-Length. The same url and path
//! in one session is downloaded once.

use super::types::MountFileOutput;
use crate::egress::Download;
use crate::error::ToolError;
use crate::paths::clean_relative;
use crate::sessions::SessionRef;
use crate::state::AppState;
use bytes::Bytes;
use prims_protocol::client::MountUpload;
use prims_protocol::wire::MountSize;

/// A file mounted (or found already mounted).
pub(crate) struct Mounted {
    pub(crate) path: String,
    pub(crate) bytes: u64,
    pub(crate) cached: bool,
}

pub(crate) async fn mount_file(
    app: &AppState,
    session: &SessionRef,
    url: &str,
    mount_path: &str,
) -> Result<MountFileOutput, ToolError> {
    let _running = app.watch.begin(&session.id);
    let m = mount(app, session, url, mount_path).await?;
    if !m.cached {
        let written = [format!("mounts/{}", m.path)];
        app.watch.changed(&app.sup, session, &written).await;
    }
    Ok(MountFileOutput {
        mounted_as: format!("mounts/{}", m.path),
        bytes: m.bytes,
        cached: m.cached,
        session_id: session.id.clone(),
    })
}

/// Download `url` to `mounts/<mount_path>` of `session`, unless this session
/// already has it there.
pub(crate) async fn mount(
    app: &AppState,
    session: &SessionRef,
    url: &str,
    mount_path: &str,
) -> Result<Mounted, ToolError> {
    let path = clean_relative(mount_path, "mount_path", false)?;
    let shown = format!("mounts/{path}");
    if let Some(bytes) = app.sessions.mounted(&session.id, url, &path) {
        let tenant = session.tenant.as_deref();
        let present = async {
            let c = app.sup.client().await?;
            c.read_file(&session.id, tenant, &shown, 0, 0).await
        };
        match present.await {
            Ok(f) if f.size == bytes => {
                tracing::debug!(session = %session.tag(), url, path, "mount served from the session");
                return Ok(Mounted {
                    path,
                    bytes,
                    cached: true,
                });
            }
            _ => app.sessions.forget_mount(&session.id, url, &path),
        }
    }
    let egress = app.egress()?;
    let mut download = egress.download(url).await.map_err(|e| failed(url, e))?;
    let bytes = stream_to_mount(app, session, &path, &mut download, url).await?;
    app.sessions.remember_mount(&session.id, url, &path, bytes);
    tracing::info!(session = %session.tag(), url, path, bytes, "mounted a download");
    Ok(Mounted {
        path,
        bytes,
        cached: false,
    })
}

fn failed(url: &str, e: impl std::fmt::Display) -> ToolError {
    ToolError(format!("Downloading {url} failed: {e}"))
}

/// Passes a download to the supervisor as it arrives, so no body is ever
/// held here, however large and however many run at once: each send waits
/// for room on the supervisor connection, so the body is read no faster
/// than the supervisor writes it. A body without Content-Length goes as an
/// open-ended upload capped at `egress.max_download`, which the supervisor
/// keeps only once told it is complete. On any failure the upload is
/// aborted and awaited, so its temporary file is gone when the tool answers.
async fn stream_to_mount(
    app: &AppState,
    session: &SessionRef,
    path: &str,
    download: &mut Download,
    url: &str,
) -> Result<u64, ToolError> {
    let size = match download.content_length {
        Some(n) => MountSize::Exact(n),
        None => MountSize::AtMost(download.limit()),
    };
    let c = app.sup.client().await?;
    let tenant = session.tenant.as_deref();
    let mut up = c.start_mount(&session.id, tenant, path, size).await?;
    match pump(&mut up, download, size, url).await {
        Ok(()) => Ok(up.finish().await?.bytes),
        Err(e) => {
            if let Err(abort) = up.abort().await {
                tracing::warn!(session = %session.tag(), path, error = %abort, "aborting an upload failed");
            }
            Err(e)
        }
    }
}

/// Copies the body into `up` one chunk behind the download: the chunk that
/// completes an exact upload (and with it the file) is sent only once the
/// body is known to end there, so a body longer than announced never
/// leaves a file behind.
async fn pump(
    up: &mut MountUpload,
    download: &mut Download,
    size: MountSize,
    url: &str,
) -> Result<(), ToolError> {
    let mut held: Option<Bytes> = None;
    while let Some(chunk) = download.next_chunk().await.map_err(|e| failed(url, e))? {
        if let MountSize::Exact(n) = size {
            if download.received() > n {
                let why = format!("the server sent more than the {n} bytes it announced");
                return Err(failed(url, why));
            }
        }
        if let Some(previous) = held.replace(chunk) {
            up.send(&previous).await?;
        }
    }
    if let MountSize::Exact(n) = size {
        let got = download.received();
        if got != n {
            let why = format!("the body ended after {got} of {n} bytes");
            return Err(failed(url, why));
        }
    }
    if let Some(last) = held {
        up.send(&last).await?;
    }
    Ok(())
}
