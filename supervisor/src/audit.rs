//! The audit log: one JSON line per run, one per egress decision of a run
//! (per host, port and outcome), and one per package-cache entry that
//! failed verification, appended to `state_dir/audit.log` (mode 0600:
//! it tells who ran what). Sessions appear by name, the keyed hash of their
//! id, never by id.

use serde::Serialize;
use sha2::{Digest, Sha256};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Debug)]
pub struct Audit {
    path: PathBuf,
    lock: Mutex<()>,
}

#[derive(Serialize)]
pub(crate) struct RunRecord<'a> {
    pub time: u64,
    /// The session's name (see `sessions::SessionKey`).
    pub session: &'a str,
    pub tenant: Option<&'a str>,
    pub code_sha256: String,
    pub requirements: &'a [String],
    pub env: &'a str,
    pub outcome: &'a prims_protocol::jail::Outcome,
    pub cancelled: bool,
}

pub(crate) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

pub(crate) fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

impl Audit {
    /// An existing log that others could read (an earlier version made
    /// it 0644) is made 0600.
    pub fn new(state_dir: &Path) -> Self {
        let path = state_dir.join("audit.log");
        if let Ok(m) = std::fs::symlink_metadata(&path) {
            if m.is_file() && m.permissions().mode() & 0o077 != 0 {
                if let Err(e) =
                    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                {
                    tracing::error!(path = %path.display(), error = %e, "could not make the audit log private");
                }
            }
        }
        Audit {
            path,
            lock: Mutex::new(()),
        }
    }

    /// Append one run record. A failure is logged, never fatal to the run.
    pub(crate) fn record(&self, rec: &RunRecord<'_>) {
        self.append(rec);
    }

    /// What the egress proxy decided for one run: a line per host, port and
    /// outcome, with how often.
    pub(crate) fn egress(
        &self,
        session: &str,
        tenant: Option<&str>,
        report: &prims_protocol::egress::NetworkReport,
    ) {
        #[derive(Serialize)]
        struct Decision<'a> {
            time: u64,
            event: &'static str,
            session: &'a str,
            tenant: Option<&'a str>,
            decision: &'static str,
            host: &'a str,
            port: u16,
            count: u64,
            #[serde(skip_serializing_if = "Option::is_none")]
            bytes: Option<u64>,
            #[serde(skip_serializing_if = "Option::is_none")]
            reason: Option<&'a str>,
        }
        let time = now_secs();
        for a in &report.allowed {
            self.append(&Decision {
                time,
                event: "egress",
                session,
                tenant,
                decision: "allowed",
                host: &a.host,
                port: a.port,
                count: a.connections,
                bytes: Some(a.bytes),
                reason: None,
            });
        }
        for d in &report.denied {
            self.append(&Decision {
                time,
                event: "egress",
                session,
                tenant,
                decision: "denied",
                host: &d.host,
                port: d.port,
                count: d.attempts,
                bytes: None,
                reason: Some(&d.reason),
            });
        }
    }

    /// A package-cache entry failed verification, was removed, and will be
    /// fetched again by the build that found it.
    pub(crate) fn cache_refetch(&self, entry: &str, why: &str) {
        #[derive(Serialize)]
        struct Refetch<'a> {
            time: u64,
            event: &'static str,
            entry: &'a str,
            why: &'a str,
        }
        self.append(&Refetch {
            time: now_secs(),
            event: "package_cache_refetch",
            entry,
            why,
        });
    }

    fn append(&self, rec: &impl Serialize) {
        let Ok(mut line) = serde_json::to_vec(rec) else {
            return;
        };
        line.push(b'\n');
        let _g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let res = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&self.path)
            .and_then(|mut f| f.write_all(&line));
        if let Err(e) = res {
            tracing::error!(path = %self.path.display(), error = %e, "audit log write failed");
        }
    }
}
