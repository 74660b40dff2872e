//! The agent a live interpreter runs: stdlib Python in `agent.py`, started
//! in the jail as `python -I -u -c AGENT_SOURCE` (a fork template as
//! `python -s -u -c`, see start.rs) with one end of the channel socket on
//! fd 3. The constants here are the agent's limits and formats as the
//! supervisor relies on them; agent.py spells the same numbers, and a test
//! checks that the two agree.

#[cfg(test)]
use std::os::fd::RawFd;

/// The agent's program text, for `python -I -u -c`: the agent, its
/// notebook half, its fork-template half, and the call that starts it.
pub(crate) const AGENT_SOURCE: &str = concat!(
    include_str!("agent.py"),
    "\n",
    include_str!("notebook.py"),
    "\n",
    include_str!("fork.py"),
    "\nmain()\n"
);

#[cfg(test)]
/// Where the agent finds its channel when it starts.
pub(crate) const CHANNEL_FD: RawFd = 3;

/// The agent's exit code when the code closed or replaced its channel.
pub(crate) const CHANNEL_LOST_EXIT: i32 = 118;

/// Set in a fork template's jail: the agent forks children after its
/// imports instead of running cells (fork.py).
pub(crate) const TEMPLATE_ENV: &str = "PRIMS_TEMPLATE";

/// Python's allocator, set to `malloc` in a template (start.rs
/// `template_allocator`) and dropped by the agent at once.
pub(crate) const ALLOCATOR_ENV: &str = "PYTHONMALLOC";

/// The thread-pool sizes of numpy's BLAS builds and their kin, set to 1 in
/// a template (a thread does not survive a fork) and dropped in its
/// children (fork.py).
pub(crate) const BLAS_THREADS: [&str; 4] = [
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
];

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

/// The kernel layer's site directory, in the jail (notebook.py reads it).
pub(crate) const KERNEL_ENV: &str = "PRIMS_KERNEL";

/// The mime types an `output` may carry (notebook.py's MIME_KEPT).
pub(crate) const MIME_KEPT: [&str; 7] = [
    "text/plain",
    "text/html",
    "text/markdown",
    "image/png",
    "image/jpeg",
    "image/svg+xml",
    "application/json",
];

/// `output` frames one cell may send, and their values' bytes together
/// (notebook.py's OUTPUTS_MAX and OUTPUTS_BYTES_MAX).
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
