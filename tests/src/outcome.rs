//! [`Run`]: a parsed `prims run --json` outcome, with the `SC`, `ERR` and
//! `KV` lines python printed.

use crate::child::{clip, RawOutput};
use base64::Engine as _;
use serde_json::Value;
use std::collections::BTreeMap;

/// A parsed `prims run --json` outcome.
#[derive(Debug, Clone)]
pub struct Run {
    pub raw: RawOutput,
    pub json: Value,
}

impl Run {
    pub fn status(&self) -> &str {
        self.json["status"].as_str().unwrap_or("<missing>")
    }
    pub fn exit_code(&self) -> Option<i64> {
        self.json["exit_code"].as_i64()
    }
    pub fn signal(&self) -> Option<i64> {
        self.json["signal"].as_i64()
    }
    pub fn wall_ms(&self) -> Option<u64> {
        self.json["wall_ms"].as_u64()
    }
    /// The exit code of the prims process itself.
    pub fn prims_exit(&self) -> Option<i32> {
        self.raw.code
    }

    fn b64(&self, key: &str) -> Vec<u8> {
        let s = self.json[key]
            .as_str()
            .unwrap_or_else(|| panic!("outcome has no string `{key}`:\n{}", self.describe()));
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .unwrap_or_else(|e| panic!("`{key}` is not base64 ({e}):\n{}", self.describe()))
    }

    /// python's stdout, exact bytes (from `stdout_base64`).
    pub fn stdout_bytes(&self) -> Vec<u8> {
        self.b64("stdout_base64")
    }
    /// python's stderr, exact bytes (from `stderr_base64`).
    pub fn stderr_bytes(&self) -> Vec<u8> {
        self.b64("stderr_base64")
    }
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.stdout_bytes()).into_owned()
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr_bytes()).into_owned()
    }
    pub fn lines(&self) -> Vec<String> {
        self.stdout().lines().map(str::to_string).collect()
    }

    /// Everything useful for a failure message.
    pub fn describe(&self) -> String {
        let mut j = self.json.clone();
        if let Some(o) = j.as_object_mut() {
            for k in ["stdout", "stderr", "stdout_base64", "stderr_base64"] {
                if let Some(Value::String(s)) = o.get_mut(k) {
                    *s = clip(s, 3000);
                }
            }
        }
        format!(
            "prims exit {:?} (signal {:?}); outcome:\n{}\n--- prims stderr ---\n{}",
            self.raw.code,
            self.raw.signal,
            serde_json::to_string_pretty(&j).unwrap_or_default(),
            clip(&self.raw.stderr_str(), 3000)
        )
    }

    /// Panics unless the outcome's status is `status`.
    pub fn assert_status(&self, status: &str) -> &Run {
        if self.status() != status {
            panic!(
                "expected status {status:?}, observed {:?}:\n{}",
                self.status(),
                self.describe()
            );
        }
        self
    }

    /// Panics unless python exited 0 (status "ok", prims exit 0).
    pub fn assert_ok(&self) -> &Run {
        self.assert_status("ok");
        if self.prims_exit() != Some(0) {
            panic!(
                "status ok but prims exited {:?}:\n{}",
                self.prims_exit(),
                self.describe()
            );
        }
        self
    }

    /// `SC name ret errno` lines.
    pub fn syscalls(&self) -> BTreeMap<String, (i64, i32)> {
        let mut m = BTreeMap::new();
        for l in self.lines() {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() == 4 && f[0] == "SC" {
                if let (Ok(r), Ok(e)) = (f[2].parse(), f[3].parse()) {
                    m.insert(f[1].to_string(), (r, e));
                }
            }
        }
        m
    }

    /// `ERR name errno|ok` lines: `Some(errno)` or `None` for success.
    pub fn errors(&self) -> BTreeMap<String, Option<i32>> {
        let mut m = BTreeMap::new();
        for l in self.lines() {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() == 3 && f[0] == "ERR" {
                let v = if f[2] == "ok" {
                    None
                } else {
                    Some(f[2].parse().unwrap_or(-1))
                };
                m.insert(f[1].to_string(), v);
            }
        }
        m
    }

    /// The rest of the `KV name ...` line.
    pub fn kv(&self, name: &str) -> Option<String> {
        let prefix = format!("KV {name} ");
        let exact = format!("KV {name}");
        self.lines().into_iter().find_map(|l| {
            if let Some(rest) = l.strip_prefix(&prefix) {
                Some(rest.to_string())
            } else if l == exact {
                Some(String::new())
            } else {
                None
            }
        })
    }
}
