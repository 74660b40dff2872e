//! The audit log: one JSON line per run, appended to `state_dir/audit.log`.

use serde::Serialize;
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

pub struct Audit {
    path: PathBuf,
    lock: Mutex<()>,
}

#[derive(Serialize)]
pub struct RunRecord<'a> {
    pub time: u64,
    pub session: &'a str,
    pub tenant: Option<&'a str>,
    pub code_sha256: String,
    pub requirements: &'a [String],
    pub env: &'a str,
    pub outcome: &'a prims_protocol::Outcome,
    pub cancelled: bool,
}

pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

pub fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

impl Audit {
    pub fn new(state_dir: &Path) -> Self {
        Audit {
            path: state_dir.join("audit.log"),
            lock: Mutex::new(()),
        }
    }

    /// Append one record. A failure is logged, never fatal to the run.
    pub fn record(&self, rec: &RunRecord<'_>) {
        let Ok(mut line) = serde_json::to_vec(rec) else {
            return;
        };
        line.push(b'\n');
        let _g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let res = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .and_then(|mut f| f.write_all(&line));
        if let Err(e) = res {
            tracing::error!(path = %self.path.display(), error = %e, "audit log write failed");
        }
    }
}
