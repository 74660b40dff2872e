//! The IPython layer an interpreter gets: a read-only directory of packages
//! (IPython, matplotlib, matplotlib-inline, cloudpickle) bound at `/ipython` in its jail
//! and put last on `sys.path`, after its environment's packages and the
//! session's, so every session runs cells through IPython whatever its
//! requirements, and no cached environment is rebuilt for it. It is the
//! admin's directory (`python.ipython_site`) or an environment built from
//! `python.ipython_packages`, leased for the interpreter's life.

use super::agent::IPYTHON_ENV;
use crate::envs::{EnvLease, Envs};
use prims_policy::Policy;
use prims_protocol::jail::{Bind, JobSpec};
use std::path::{Path, PathBuf};

/// Where the layer is, in the jail.
const IPYTHON_TARGET: &str = "/ipython";

/// fontconfig's configuration, which matplotlib's font search reads.
const FONTS_CONF: &str = "/etc/fonts";

/// A IPython layer on the host, and the lease that keeps a built one.
#[derive(Debug)]
pub(crate) struct IpythonLayer {
    pub site: PathBuf,
    pub _lease: Option<EnvLease>,
}

impl IpythonLayer {
    /// The admin's directory, if the policy names one.
    pub(crate) fn from_policy(policy: &Policy) -> Option<IpythonLayer> {
        let site = policy.python.ipython_site.clone()?;
        Some(IpythonLayer { site, _lease: None })
    }

    /// The layer for a new interpreter: the admin's directory, else the
    /// built one (built now if it is not yet, with `progress`). None when
    /// there is no layer, or it cannot be built: cells then run as plain
    /// Python, and the failure is logged.
    pub(crate) async fn get(
        policy: &Policy,
        envs: &Envs,
        progress: &(dyn Fn(String) + Send + Sync),
    ) -> Option<IpythonLayer> {
        if let Some(k) = IpythonLayer::from_policy(policy) {
            return Some(k);
        }
        match envs.ensure_ipython(progress).await {
            Ok(Some(lease)) => Some(IpythonLayer {
                site: envs.site_packages(&lease),
                _lease: Some(lease),
            }),
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(error = %e, "no IPython layer; cells run without notebook semantics");
                None
            }
        }
    }

    /// The same layer, with a lease of its own.
    pub(crate) fn share(&self) -> IpythonLayer {
        IpythonLayer {
            site: self.site.clone(),
            _lease: self._lease.as_ref().map(EnvLease::share),
        }
    }

    /// Binds the layer (and fontconfig's configuration) into `spec`'s jail.
    pub(crate) fn apply(&self, spec: &mut JobSpec) {
        spec.binds.push(Bind {
            source: self.site.clone(),
            target: IPYTHON_TARGET.into(),
            writable: false,
        });
        spec.env.push(format!("{IPYTHON_ENV}={IPYTHON_TARGET}"));
        let fonts = Path::new(FONTS_CONF);
        if fonts.is_dir() && !spec.ro_binds.iter().any(|b| fonts.starts_with(b)) {
            spec.ro_binds.push(fonts.to_path_buf());
        }
    }
}
