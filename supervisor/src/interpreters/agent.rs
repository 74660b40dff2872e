//! The agent a live interpreter runs: the Python package of
//! `supervisor/agent/` (`prims_agent`, stdlib only), with one end of the
//! channel socket on fd 3. The supervisor writes its files once into a
//! read-only directory of its own ([`AgentDir`]), which every interpreter's
//! jail binds at [`AGENT_TARGET`] and python runs: `python -I -u /prims`
//! (a fork template `python -s -u /prims`, see start.rs), so that `ps`
//! shows a short command line. The constants here are the agent's limits
//! and formats as the supervisor relies on them; the package spells the
//! same numbers, and a test checks that the two agree.

use prims_protocol::jail::{Bind, JobSpec, VENV_PYTHON};
use sha2::{Digest, Sha256};
#[cfg(test)]
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};

/// The agent's files: each one's path in the agent's directory, and its
/// text.
pub(crate) const AGENT_FILES: [(&str, &str); 17] = [
    ("__main__.py", include_str!("../../agent/__main__.py")),
    (
        "prims_agent/__init__.py",
        include_str!("../../agent/prims_agent/__init__.py"),
    ),
    (
        "prims_agent/main.py",
        include_str!("../../agent/prims_agent/main.py"),
    ),
    (
        "prims_agent/agent.py",
        include_str!("../../agent/prims_agent/agent.py"),
    ),
    (
        "prims_agent/charts.py",
        include_str!("../../agent/prims_agent/charts.py"),
    ),
    (
        "prims_agent/channel.py",
        include_str!("../../agent/prims_agent/channel.py"),
    ),
    (
        "prims_agent/state.py",
        include_str!("../../agent/prims_agent/state.py"),
    ),
    (
        "prims_agent/mp_main.py",
        include_str!("../../agent/prims_agent/mp_main.py"),
    ),
    (
        "prims_agent/shell.py",
        include_str!("../../agent/prims_agent/shell.py"),
    ),
    (
        "prims_agent/stdio.py",
        include_str!("../../agent/prims_agent/stdio.py"),
    ),
    (
        "prims_agent/stops.py",
        include_str!("../../agent/prims_agent/stops.py"),
    ),
    (
        "prims_agent/text.py",
        include_str!("../../agent/prims_agent/text.py"),
    ),
    (
        "prims_agent/trial.py",
        include_str!("../../agent/prims_agent/trial.py"),
    ),
    (
        "prims_agent/fork/__init__.py",
        include_str!("../../agent/prims_agent/fork/__init__.py"),
    ),
    (
        "prims_agent/fork/parent.py",
        include_str!("../../agent/prims_agent/fork/parent.py"),
    ),
    (
        "prims_agent/fork/syscalls.py",
        include_str!("../../agent/prims_agent/fork/syscalls.py"),
    ),
    (
        "prims_agent/fork/template.py",
        include_str!("../../agent/prims_agent/fork/template.py"),
    ),
];

/// Where every interpreter's jail has the agent's directory.
pub(crate) const AGENT_TARGET: &str = "/prims";

/// The agent's files on the host: a directory the supervisor wrote once,
/// owned by root and read-only to everyone else, named after what it
/// holds, so that an upgrade never changes the files of a running jail.
#[derive(Debug, Clone)]
pub(crate) struct AgentDir {
    pub dir: PathBuf,
}

impl AgentDir {
    /// The directory of these files under `parent`, written there unless it
    /// is there already (made whole under a temporary name, then renamed
    /// into place). Directories of other versions under `parent` are
    /// removed.
    pub(crate) fn install(parent: &Path) -> std::io::Result<AgentDir> {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        let mut hash = Sha256::new();
        for (path, text) in AGENT_FILES {
            hash.update(path.as_bytes());
            hash.update([0]);
            hash.update(text.as_bytes());
            hash.update([0]);
        }
        let name = format!("agent-{}", &hex::encode(hash.finalize())[..16]);
        let dir = parent.join(&name);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(parent)?;
        if !dir.is_dir() {
            let tmp = tempfile::Builder::new()
                .prefix(".agent-")
                .tempdir_in(parent)?;
            write_files(tmp.path())?;
            std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755))?;
            std::fs::rename(tmp.keep(), &dir)?;
        }
        for entry in std::fs::read_dir(parent)?.flatten() {
            let other = entry.file_name();
            let other = other.to_string_lossy();
            if other.starts_with("agent-") && other != name {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
        Ok(AgentDir { dir })
    }

    /// The agent's files on a tmpfs of their own mounted at `dir`, read-only
    /// once written: what the daemon's jails bind. A jail's mount table
    /// then names the tmpfs's own root, not a path under the state
    /// directory. What a crashed supervisor left mounted there goes first.
    pub(crate) fn mount(dir: &Path) -> std::io::Result<AgentDir> {
        use nix::mount::{mount, umount2, MntFlags, MsFlags};
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)?;
        // Each unmount takes one of the mounts stacked there: EINVAL once
        // none is left.
        while umount2(dir, MntFlags::MNT_DETACH).is_ok() {}
        let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
        mount(
            Some("prims-agent"),
            dir,
            Some("tmpfs"),
            flags,
            Some("size=2m,nr_inodes=256,mode=0755"),
        )?;
        write_files(dir)?;
        // A fork of another thread of ours may hold a file it wrote open
        // for a moment (until its exec closes it), and the kernel refuses
        // to make a file system read-only under a writer (EBUSY).
        let read_only = || {
            mount(
                None::<&str>,
                dir,
                None::<&str>,
                flags | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY,
                None::<&str>,
            )
        };
        let mut tries = 0;
        while let Err(e) = read_only() {
            tries += 1;
            if e != nix::errno::Errno::EBUSY || tries == 50 {
                return Err(e.into());
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        Ok(AgentDir {
            dir: dir.to_path_buf(),
        })
    }

    /// Unmounts what [`AgentDir::mount`] mounted, as the daemon ends.
    pub(crate) fn unmount(&self) {
        let _ = nix::mount::umount2(&self.dir, nix::mount::MntFlags::MNT_DETACH);
    }

    /// Binds the agent into `spec`'s jail and makes it the program:
    /// `python <flags> /prims`.
    pub(crate) fn apply(&self, spec: &mut JobSpec, flags: &[&str]) {
        spec.binds.push(Bind {
            source: self.dir.clone(),
            target: AGENT_TARGET.into(),
            writable: false,
        });
        spec.code.clear();
        spec.argv = std::iter::once(VENV_PYTHON)
            .chain(flags.iter().copied())
            .chain([AGENT_TARGET])
            .map(str::to_string)
            .collect();
    }
}

/// Writes the agent's files under `root`: directories 0755, files 0644.
fn write_files(root: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    for (path, text) in AGENT_FILES {
        let file = root.join(path);
        if let Some(up) = file.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(up)?;
        }
        std::fs::write(&file, text)?;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644))?;
    }
    Ok(())
}

#[cfg(test)]
/// Where the agent finds its channel when it starts.
pub(crate) const CHANNEL_FD: RawFd = 3;

/// The agent's exit code when the code closed or replaced its channel.
pub(crate) const CHANNEL_LOST_EXIT: i32 = 118;

/// Set in a fork template's jail: the agent forks children after its
/// imports instead of running cells (fork/template.py).
pub(crate) const TEMPLATE_ENV: &str = "PRIMS_TEMPLATE";

/// Python's allocator, set to `malloc` in a template (start.rs
/// `template_allocator`) and dropped by the agent at once.
pub(crate) const ALLOCATOR_ENV: &str = "PYTHONMALLOC";

/// The thread-pool sizes of numpy's BLAS builds and their kin, set to 1 in
/// a template (a thread does not survive a fork) and dropped in its
/// children (fork/parent.py).
pub(crate) const BLAS_THREADS: [&str; 4] = [
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
];

#[cfg(test)]
/// The largest `fork` frame body a template reads (fork/template.py).
pub(crate) const FORK_FRAME_MAX: usize = 4096;

/// Comma-separated modules the agent imports before it reports ready.
pub(crate) const PREWARM_ENV: &str = "PRIMS_PREWARM";

/// Where `pip install` puts packages in a session (`PIP_TARGET`), which the
/// agent puts on `sys.path`: the session's own site directory.
pub(crate) const SITE_ENV: &str = "PRIMS_SITE";
pub(crate) use crate::envs::SESSION_SITE;

/// The largest frame body the agent may send; the supervisor refuses more.
pub(crate) const AGENT_FRAME_MAX: usize = 1 << 20;

/// The largest frame body the supervisor sends (a cell's code is most of it).
pub(crate) const SUPERVISOR_FRAME_MAX: usize = 4 << 20;

/// A last expression's repr is cut to this many characters.
pub(crate) const RESULT_MAX_CHARS: usize = 16_384;

/// Entries in any list the agent sends.
pub(crate) const LIST_MAX: usize = 1000;

/// Characters in a name, a why or an exception type name.
pub(crate) const NAME_MAX_CHARS: usize = 256;

/// Characters in an `error` message.
pub(crate) const MESSAGE_MAX_CHARS: usize = 1024;

/// A cell's end marker is `MARKER_PREFIX`, the cell's marker in lowercase
/// hex, then `MARKER_SUFFIX`; the agent writes it to stdout and stderr.
pub(crate) const MARKER_PREFIX: &[u8] = b"\0prims-cell-end-";
pub(crate) const MARKER_SUFFIX: &[u8] = b"\0";

/// Lowercase hex digits in a cell marker.
pub(crate) const MARKER_HEX_LEN: usize = 32;

/// The IPython layer's site directory, in the jail (shell.py reads it).
pub(crate) const IPYTHON_ENV: &str = "PRIMS_IPYTHON";

/// The mime types an `output` may carry (shell.py's MIME_KEPT).
pub(crate) const MIME_KEPT: [&str; 8] = [
    "text/plain",
    "text/html",
    "text/markdown",
    "image/png",
    "image/jpeg",
    "image/svg+xml",
    "application/json",
    CHART_MIME,
];

/// A matplotlib figure's data (charts.py's MIME), JSON like
/// `application/json`: docs/tools.md, "Chart data".
pub(crate) const CHART_MIME: &str = "application/vnd.prims.chart+json";

/// `output` frames one cell may send, and their values' bytes together
/// (shell.py's OUTPUTS_MAX and OUTPUTS_BYTES_MAX).
pub(crate) const OUTPUTS_MAX: usize = 32;
pub(crate) const OUTPUTS_BYTES_MAX: usize = 4 * 1024 * 1024;

/// Where figures are copied, relative to the workspace (FIGURES_REL).
pub(crate) const FIGURES_REL: &str = "output/figures";

#[cfg(test)]
/// True for a marker the agent accepts: [`MARKER_HEX_LEN`] lowercase hex.
pub(crate) fn is_marker_hex(hex: &str) -> bool {
    hex.len() == MARKER_HEX_LEN && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The bytes that end a cell whose marker is `hex`.
pub(crate) fn marker_bytes(hex: &str) -> Vec<u8> {
    [MARKER_PREFIX, hex.as_bytes(), MARKER_SUFFIX].concat()
}

#[cfg(test)]
mod tests;
