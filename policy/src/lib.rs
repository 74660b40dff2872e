//! The PRIMS policy: the admin-edited TOML that bounds every run.
//!
//! Parsing is strict (unknown keys are errors) and every message names the
//! key path, line and column, because a policy typo that is silently ignored
//! is a limit that is silently not enforced.
//!
//! It owns the schema and its defaults, validation, the limit arithmetic
//! that turns the policy and a request into a job's limits, and the egress
//! allow-list (its entries, matching and narrowing). It must never:
//!
//! - let a request raise a limit or widen the allow-list: a request only
//!   lowers ([`Policy::job_limits`]) and narrows ([`network`]);
//! - accept an unknown key or a value out of its range without an error;
//! - act on the host: it reads the policy file and the metadata of the
//!   paths the policy names, and nothing else (no processes, sockets or
//!   cgroups; no unsafe code);
//! - be linked by the jailer, which receives its limits as the plain records
//!   of `prims-protocol`.

#![forbid(unsafe_code)]

mod error;
mod merge;
pub mod network;
mod schema;
mod spans;
mod units;
mod validate;

pub use error::{Issue, PolicyError};
pub use merge::{
    FLOOR_CPU_TIME_MS, FLOOR_MEMORY_BYTES, FLOOR_OUTPUT_BYTES, FLOOR_PIDS, FLOOR_WALL_TIME_MS,
};
pub use schema::{
    Allowed, Branches, Cgroup, Egress, Filesystem, Identity, Landlock, Limits, Network,
    NetworkPolicy, Policy, Python, Seccomp, Secret, SecretKind, SecretSource, SessionQuota,
    Sessions, SocketFamily, Tasks, Tls,
};
pub use spans::Location;
pub use units::{ByteSize, HumanDuration};
pub use validate::{parse_egress_rule, EgressRule};

use prims_protocol::jail::{JobLimits, LimitRequest};
use std::path::Path;
use toml::de::DeTable;

impl Policy {
    /// Parses and validates policy text; the error lists every problem found.
    pub fn from_toml_str(text: &str) -> Result<Policy, PolicyError> {
        let doc = DeTable::parse(text).map_err(|e| PolicyError::Invalid {
            file: None,
            issues: vec![error::syntax_issue(text, &e)],
        })?;
        let policy: Policy = toml::from_str(text).map_err(|e| PolicyError::Invalid {
            file: None,
            issues: vec![error::schema_issue(text, doc.get_ref(), &e)],
        })?;
        let issues: Vec<Issue> = validate::check(&policy)
            .into_iter()
            .map(|f| error::semantic_issue(Some(text), Some(doc.get_ref()), &f.paths, f.message))
            .collect();
        if issues.is_empty() {
            Ok(policy)
        } else {
            Err(PolicyError::Invalid { file: None, issues })
        }
    }

    /// Reads, parses and validates a policy file; messages carry its path.
    pub fn load(path: &Path) -> Result<Policy, PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Policy::from_toml_str(&text).map_err(|e| e.with_file(path))
    }

    /// Checks a policy built in code, with the same rules as a parsed one.
    pub fn validate(&self) -> Result<(), PolicyError> {
        let issues: Vec<Issue> = validate::check(self)
            .into_iter()
            .map(|f| error::semantic_issue(None, None, &f.paths, f.message))
            .collect();
        if issues.is_empty() {
            Ok(())
        } else {
            Err(PolicyError::Invalid { file: None, issues })
        }
    }

    /// The effective policy as TOML with human units; the run slots are
    /// written out resolved so the admin sees what is actually in force.
    pub fn to_toml_string(&self) -> String {
        let mut effective = self.clone();
        effective.limits.max_concurrent_runs = Some(self.max_concurrent_runs());
        effective.limits.max_concurrent_fresh_runs = Some(self.max_concurrent_fresh_runs());
        match toml::to_string(&effective) {
            Ok(s) => s,
            // Only reachable with a non-finite `cpus`, which validation rejects.
            Err(e) => format!("# cannot render policy: {e}\n"),
        }
    }

    /// Facts about this host that do not make the policy invalid but will
    /// probably make runs fail or differ from what the admin expects.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (name, secret) in &self.secrets {
            if let Some(schema::SecretSource::File(f)) = secret.source() {
                if std::fs::metadata(f).is_err() {
                    out.push(format!(
                        "secrets.{name}: {} cannot be read on this host; the server refuses to start without it",
                        f.display()
                    ));
                }
            }
        }
        for (i, bind) in self.filesystem.ro_binds.iter().enumerate() {
            if std::fs::symlink_metadata(bind).is_err() {
                out.push(format!(
                    "filesystem.ro_binds[{i}]: {} does not exist on this host",
                    bind.display()
                ));
            }
        }
        for (name, path) in &self.filesystem.interpreters {
            let key = spans::KeyPath::new(&["filesystem", "interpreters", name]);
            match std::fs::metadata(path) {
                Err(_) => out.push(format!(
                    "{key}: {} does not exist on this host",
                    path.display()
                )),
                Ok(m) if !m.is_file() => {
                    out.push(format!("{key}: {} is not a regular file", path.display()))
                }
                Ok(_) => {}
            }
        }
        let full_output = self.limits.output_bytes.bytes().saturating_mul(2);
        let budget = self.tasks.max_result_bytes_per_tenant;
        if budget.bytes() < full_output {
            out.push(format!(
                "tasks.max_result_bytes_per_tenant: {budget} cannot hold the result of a run \
                 that fills its stdout and stderr (2 x limits.output_bytes = {}); such a \
                 result is not kept, and its task completes saying so",
                ByteSize(full_output)
            ));
        }
        out
    }

    /// Merges a caller's request into concrete limits; it can only lower them.
    pub fn job_limits(&self, req: &LimitRequest) -> JobLimits {
        merge::job_limits(self, req)
    }

    /// The `AF_*` numbers seccomp lets a run's `socket()` create: the
    /// policy's, and IPv4 and IPv6 for the jail's own loopback, which every
    /// mode has (the jailer allows them only as TCP and UDP).
    pub fn socket_family_numbers(&self) -> Vec<i32> {
        let mut v: Vec<i32> = self
            .seccomp
            .socket_families
            .iter()
            .map(|f| f.number())
            .chain([libc::AF_INET, libc::AF_INET6])
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// The interpreter used when a call names none: its name (`"3.11"`) and
    /// host path. Always `Some` for a validated policy.
    pub fn default_interpreter(&self) -> Option<(&str, &Path)> {
        let name = self.filesystem.default_interpreter.as_str();
        self.filesystem
            .interpreters
            .get(name)
            .map(|p| (name, p.as_path()))
    }

    /// How many runs may execute at once; defaults to the number of cores.
    pub fn max_concurrent_runs(&self) -> usize {
        self.limits.max_concurrent_runs.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
        })
    }

    /// How many `fresh: true` runs may execute at once, in slots of their
    /// own: twice [`Self::max_concurrent_runs`] unless set. Each hands off
    /// between the supervisor, the jail and a new python more than it
    /// computes, and at batch CPU weight it yields to session calls.
    pub fn max_concurrent_fresh_runs(&self) -> usize {
        self.limits
            .max_concurrent_fresh_runs
            .unwrap_or_else(|| self.max_concurrent_runs().saturating_mul(2))
    }
}
