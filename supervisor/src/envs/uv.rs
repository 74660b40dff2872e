//! Finding uv: the host's (on PATH), or one this server installed into
//! `state_dir/tools` with pip, once.

use super::error::EnvError;
use super::key::Settings;
use crate::egress::CA_BUNDLE;
use crate::job::Cancel;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long installing uv with pip may take.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(180);
/// How often a wait for uv looks whether its caller has given up: a
/// [`Cancel`] tells no one when it is cancelled, and a stop this late
/// costs a cut install nothing that matters.
const CANCEL_POLL: Duration = Duration::from_millis(100);

/// The located uv binary, resolved once; later calls are a lock and a clone.
#[derive(Debug, Default)]
pub(super) struct UvTool {
    found: tokio::sync::Mutex<Option<PathBuf>>,
}

/// True for a regular file that starts like an ELF binary. Shims and wrapper
/// scripts are refused: the install jail has no shell and no pyenv.
fn is_elf(path: &Path) -> bool {
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && magic == *b"\x7fELF"
}

/// `uv` from the daemon's PATH, resolved through symlinks.
fn on_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|d| d.is_absolute())
        .map(|d| d.join("uv"))
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .find(|p| is_elf(p))
}

pub(super) fn tools_uv(state_dir: &Path) -> PathBuf {
    state_dir.join("tools/bin/uv")
}

impl UvTool {
    /// The uv binary to bind into install jails. Once `cancel` is
    /// cancelled it gives up, waiting for another caller's install of uv
    /// or running its own, which is killed: a session's install that its
    /// call's time cut must not go on as pip on the host.
    pub(super) async fn get(
        &self,
        state_dir: &Path,
        interpreter: &Path,
        settings: &Settings,
        progress: &(dyn Fn(String) + Send + Sync),
        cancel: &Cancel,
    ) -> Result<PathBuf, EnvError> {
        let mut found = tokio::select! {
            found = self.found.lock() => found,
            () = cancelled(cancel) => return Err(EnvError::Cancelled),
        };
        if let Some(p) = found.as_ref().filter(|p| is_elf(p)) {
            return Ok(p.clone());
        }
        let tools = tools_uv(state_dir);
        let path = if let Some(p) = on_path() {
            p
        } else if is_elf(&tools) {
            tools
        } else {
            progress("installing uv (once per server) with pip".to_string());
            install(state_dir, interpreter, settings, cancel).await?;
            if !is_elf(&tools) {
                return Err(EnvError::Uv {
                    message: format!("pip installed uv but {} is missing", tools.display()),
                });
            }
            tools
        };
        tracing::info!(uv = %path.display(), "using uv");
        *found = Some(path.clone());
        Ok(path)
    }
}

/// Ends once `cancel` is cancelled.
async fn cancelled(cancel: &Cancel) {
    let mut tick = tokio::time::interval(CANCEL_POLL);
    loop {
        tick.tick().await;
        if cancel.is_cancelled() {
            return;
        }
    }
}

/// `python -m pip install --target state_dir/tools uv`, with a clean
/// environment, wheels only (pip runs as root on the host), and the index
/// settings of the policy. Installs into a fresh directory and renames it
/// in. A cancel kills pip (`kill_on_drop`) and removes what it wrote.
async fn install(
    state_dir: &Path,
    interpreter: &Path,
    s: &Settings,
    cancel: &Cancel,
) -> Result<(), EnvError> {
    let final_dir = state_dir.join("tools");
    let staging = state_dir.join(format!(".tools-{}", super::cache::rand_hex()));
    let mut candidates = vec![interpreter.to_path_buf()];
    let system = PathBuf::from("/usr/bin/python3");
    if system != interpreter && system.is_file() {
        candidates.push(system);
    }
    let mut last = String::new();
    for python in candidates {
        let mut cmd = tokio::process::Command::new(&python);
        cmd.args(["-m", "pip", "install", "--target"])
            .arg(&staging)
            .args(["--only-binary", ":all:", "--no-input", "--no-cache-dir"])
            .args(["--disable-pip-version-check", "--no-warn-script-location"]);
        if !s.index_url.is_empty() {
            cmd.args(["--index-url", &s.index_url]);
        }
        for u in &s.extra_index_urls {
            cmd.args(["--extra-index-url", u]);
        }
        for l in &s.find_links {
            cmd.args(["--find-links", l]);
        }
        cmd.arg("uv")
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", state_dir)
            .env("LANG", "C.UTF-8")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        if Path::new(CA_BUNDLE).is_file() {
            cmd.env("PIP_CERT", CA_BUNDLE)
                .env("SSL_CERT_FILE", CA_BUNDLE);
        }
        let out = tokio::select! {
            out = tokio::time::timeout(INSTALL_TIMEOUT, cmd.output()) => out,
            () = cancelled(cancel) => {
                // `select!` dropped the output future before this runs,
                // which sent pip SIGKILL (`kill_on_drop`). What a pip
                // still dying writes after this goes with the start-up
                // sweep of `.tools-*` directories.
                super::cache::remove_any(&staging);
                return Err(EnvError::Cancelled);
            }
        };
        let out = match out {
            Err(_) => {
                last = format!("pip did not finish within {}s", INSTALL_TIMEOUT.as_secs());
                continue;
            }
            Ok(Err(e)) => {
                last = format!("could not run {}: {e}", python.display());
                continue;
            }
            Ok(Ok(out)) => out,
        };
        if out.status.success() {
            super::cache::remove_any(&final_dir);
            return std::fs::rename(&staging, &final_dir)
                .map_err(EnvError::io("renaming into place", &final_dir));
        }
        super::cache::remove_any(&staging);
        last = format!(
            "{} -m pip install uv failed: {}",
            python.display(),
            super::build::tail(&out.stderr)
        );
        tracing::warn!(message = %last, "installing uv");
    }
    super::cache::remove_any(&staging);
    Err(EnvError::Uv { message: last })
}
