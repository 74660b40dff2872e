//! What the environment cache is fixed with at start-up.

use std::path::PathBuf;
use std::sync::Arc;

#[derive(Debug, Clone)]
pub struct EnvConfig {
    /// Holds `envs/`, `uv-cache/` and `tools/`.
    pub state_dir: PathBuf,
    /// The jailer and cgroup parents install jails run with.
    pub jails: crate::job::Jails,
    /// Absolute path of the interpreter every environment is made for.
    pub interpreter: PathBuf,
    /// Its version, `X.Y`.
    pub version: String,
    /// Host uid (and gid) install jails run as. Never 0.
    pub build_uid: u32,
    /// Where package-cache entries that failed verification are noted.
    pub audit: Option<Arc<crate::audit::Audit>>,
    /// The proxy install jails reach the package index through.
    pub egress: Arc<crate::egress::EgressProxy>,
}
