//! The settings an environment depends on, taken from policy, and the
//! content address computed from them.

use super::error::EnvError;
use super::requirements::validate_requirements;
use prims_policy::Policy;
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Bumped whenever the way an environment is built changes, so old
/// environments are never mistaken for new ones.
const LAYOUT: &str = "prims-env-v2";

/// The policy's `python` settings, checked once when the policy arrives.
#[derive(Debug, Clone)]
pub(super) struct Settings {
    /// Normalized like user requirements.
    pub default_packages: Vec<String>,
    /// The IPython layer's packages, normalized; empty: no layer to build.
    pub ipython_packages: Vec<String>,
    pub index_url: String,
    pub extra_index_urls: Vec<String>,
    pub find_links: Vec<String>,
    pub only_binary: bool,
    /// Cap of the cached environments (`python.env_cache_bytes`).
    pub cache_bytes: u64,
    /// Cap of uv's shared package cache (`python.cache_bytes`).
    pub pkg_cache_bytes: u64,
    pub build_timeout: Duration,
    pub build_memory: u64,
    /// Size of one build's volume (`python.build_disk`).
    pub build_disk: u64,
    /// Read-only binds of an install jail, besides uv and the network files.
    pub ro_binds: Vec<PathBuf>,
    pub seccomp_extra_deny: Vec<String>,
    pub landlock_required: bool,
}

impl Settings {
    pub(super) fn from_policy(policy: &Policy, interpreter: &Path) -> Result<Settings, EnvError> {
        let py = &policy.python;
        let default_packages =
            validate_requirements(&py.default_packages).map_err(|e| EnvError::Policy {
                message: format!("python.default_packages: {e}"),
            })?;
        let ipython_packages = if py.ipython_site.is_some() {
            // The admin's own layer stands in for a built one.
            Vec::new()
        } else {
            validate_requirements(&py.ipython_packages).map_err(|e| EnvError::Policy {
                message: format!("python.ipython_packages: {e}"),
            })?
        };
        Ok(Settings {
            default_packages,
            ipython_packages,
            index_url: py.index_url.clone(),
            extra_index_urls: py.extra_index_urls.clone(),
            find_links: py.find_links.clone(),
            only_binary: py.only_binary,
            cache_bytes: py.env_cache_bytes.bytes(),
            pkg_cache_bytes: py.cache_bytes.bytes(),
            build_timeout: py.build_timeout.0,
            build_memory: py.build_memory.bytes(),
            build_disk: py.build_disk.bytes(),
            ro_binds: crate::job::ro_binds(policy, interpreter),
            seccomp_extra_deny: policy.seccomp.extra_deny.clone(),
            landlock_required: policy.landlock.required,
        })
    }

    /// The full package list of an environment: the defaults plus `reqs`
    /// (already normalized), sorted and deduplicated.
    pub(super) fn packages(&self, reqs: &[String]) -> Vec<String> {
        let mut all: Vec<String> = self.default_packages.iter().chain(reqs).cloned().collect();
        all.sort();
        all.dedup();
        all
    }
}

#[derive(Serialize)]
struct KeyInput<'a> {
    layout: &'a str,
    interpreter: &'a Path,
    version: &'a str,
    packages: &'a [String],
    index_url: &'a str,
    extra_index_urls: &'a [String],
    find_links: &'a [String],
    only_binary: bool,
}

/// sha256 (hex) over everything that decides what uv would install.
pub(super) fn env_key(
    interpreter: &Path,
    version: &str,
    packages: &[String],
    s: &Settings,
) -> String {
    let input = KeyInput {
        layout: LAYOUT,
        interpreter,
        version,
        packages,
        index_url: &s.index_url,
        extra_index_urls: &s.extra_index_urls,
        find_links: &s.find_links,
        only_binary: s.only_binary,
    };
    // Serializing plain strings, paths and bools cannot fail; an empty input
    // would still hash deterministically.
    let bytes = serde_json::to_vec(&input).unwrap_or_default();
    hex::encode(Sha256::digest(bytes))
}

/// True for a directory name that is a key.
pub(super) fn is_key(name: &str) -> bool {
    name.len() == 64
        && name
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_depends_on_every_input() {
        let p = Policy::default();
        let py = Path::new("/usr/bin/python3.11");
        let s = Settings::from_policy(&p, py).unwrap();
        let pk = s.packages(&["six".to_string()]);
        let k = env_key(py, "3.11", &pk, &s);
        assert!(is_key(&k));
        assert_eq!(k, env_key(py, "3.11", &pk, &s));
        assert_ne!(
            k,
            env_key(Path::new("/usr/bin/python3.12"), "3.11", &pk, &s)
        );
        assert_ne!(k, env_key(py, "3.12", &pk, &s));
        assert_ne!(k, env_key(py, "3.11", &s.packages(&[]), &s));
        let mut s2 = s.clone();
        s2.only_binary = false;
        assert_ne!(k, env_key(py, "3.11", &pk, &s2));
        let mut s3 = s.clone();
        s3.find_links.push("/opt/wheels".into());
        assert_ne!(k, env_key(py, "3.11", &pk, &s3));
        let mut s4 = s.clone();
        s4.index_url = "https://example/simple".into();
        assert_ne!(k, env_key(py, "3.11", &pk, &s4));
        // Limits do not change what is installed.
        let mut s5 = s.clone();
        s5.build_timeout = Duration::from_secs(1);
        assert_eq!(k, env_key(py, "3.11", &pk, &s5));
    }

    #[test]
    fn packages_merge_defaults() {
        let s =
            Settings::from_policy(&Policy::default(), Path::new("/usr/bin/python3.11")).unwrap();
        assert_eq!(
            s.packages(&["pandas".into(), "aaa".into()]),
            vec!["aaa", "openpyxl", "pandas", "requests"]
        );
    }
}
