//! What one environment build is given.

use super::key::Settings;
use super::pkgcache::PkgCache;
use crate::audit::Audit;
use crate::job::Jails;
use std::path::PathBuf;
use std::sync::Arc;

/// Everything one build needs, owned so it can move to a blocking thread.
pub(super) struct BuildJob {
    pub state_dir: PathBuf,
    pub envs_dir: PathBuf,
    pub jails: Jails,
    pub interpreter: PathBuf,
    pub version: String,
    pub build_uid: u32,
    pub uv: PathBuf,
    pub key: String,
    pub requirements: Vec<String>,
    pub packages: Vec<String>,
    pub settings: Arc<Settings>,
    pub pkgcache: Arc<PkgCache>,
    pub audit: Option<Arc<Audit>>,
    pub egress: Arc<crate::egress::EgressProxy>,
}
