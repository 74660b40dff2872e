//! `mount_file` and `run_code`'s `files[]`: download a URL (through the
//! egress guard) and stream it to the supervisor, which writes it read-only
//! under `mounts/`. The same url and path in one session is downloaded once.

use super::common::clean_relative;
use super::types::MountFileOutput;
use crate::egress::Download;
use crate::error::ToolError;
use crate::server::AppState;
use crate::sessions::SessionRef;

/// A file mounted (or found already mounted).
pub struct Mounted {
    pub path: String,
    pub bytes: u64,
    pub cached: bool,
}

pub async fn mount_file(
    app: &AppState,
    session: &SessionRef,
    url: &str,
    mount_path: &str,
) -> Result<MountFileOutput, ToolError> {
    let m = mount(app, session, url, mount_path).await?;
    Ok(MountFileOutput {
        mounted_as: format!("mounts/{}", m.path),
        bytes: m.bytes,
        cached: m.cached,
        session_id: session.id.clone(),
    })
}

/// Download `url` to `mounts/<mount_path>` of `session`, unless this session
/// already has it there.
pub async fn mount(
    app: &AppState,
    session: &SessionRef,
    url: &str,
    mount_path: &str,
) -> Result<Mounted, ToolError> {
    let path = clean_relative(mount_path, "mount_path", false)?;
    let shown = format!("mounts/{path}");
    if let Some(bytes) = app.sessions.mounted(&session.id, url, &path) {
        match app.sup.read_file(session, &shown, 0, 0).await {
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
    let fail = |e: crate::egress::EgressError| ToolError(format!("Downloading {url} failed: {e}"));
    let mut download = egress.download(url).await.map_err(fail)?;
    let bytes = match download.content_length {
        Some(size) => stream_to_mount(app, session, &path, size, &mut download, url).await?,
        None => {
            let mut data = Vec::new();
            while let Some(chunk) = download.next_chunk().await.map_err(fail)? {
                data.extend_from_slice(&chunk);
            }
            let mut up = app
                .sup
                .start_mount(session, &path, data.len() as u64)
                .await?;
            up.send(&data).await?;
            up.finish().await?.bytes
        }
    };
    app.sessions.remember_mount(&session.id, url, &path, bytes);
    tracing::info!(session = %session.tag(), url, path, bytes, "mounted a download");
    Ok(Mounted {
        path,
        bytes,
        cached: false,
    })
}

/// Pass a download of announced `size` to the supervisor chunk by chunk.
async fn stream_to_mount(
    app: &AppState,
    session: &SessionRef,
    path: &str,
    size: u64,
    download: &mut Download,
    url: &str,
) -> Result<u64, ToolError> {
    let fail = |e: crate::egress::EgressError| ToolError(format!("Downloading {url} failed: {e}"));
    let mut up = app.sup.start_mount(session, path, size).await?;
    let mut got = 0u64;
    while let Some(chunk) = download.next_chunk().await.map_err(fail)? {
        got += chunk.len() as u64;
        if got > size {
            return Err(ToolError(format!(
                "Downloading {url} failed: the server sent more than the {size} bytes it announced"
            )));
        }
        up.send(&chunk).await?;
    }
    if got != size {
        return Err(ToolError(format!(
            "Downloading {url} failed: the body ended after {got} of {size} bytes"
        )));
    }
    Ok(up.finish().await?.bytes)
}
