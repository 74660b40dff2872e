//! Semantic rules that serde cannot express. Each rule exists because the
//! value would break the jail, weaken it, or make every run fail.

use crate::schema::{Policy, SessionQuota};
use crate::spans::KeyPath;
use crate::units::ByteSize;
use std::path::Path;
use std::time::Duration;

mod bounds;
mod branches;
mod egress;
mod findings;
mod network;
mod secrets;
mod tasks;
use bounds::{
    MAX_AUTOSAVE_AFTER, MAX_INTERRUPT_GRACE, MAX_POOL_SIZE, MAX_PREWARM_IMPORTS, MAX_SAVE_TIMEOUT,
    MAX_WARM_UP_CODE,
};
pub use bounds::{
    MAX_OPEN_FILES, MAX_RUN_TIME, MAX_UID_END, MIN_BUILD_DISK, MIN_BUILD_MEMORY, MIN_CPUS,
    MIN_DISK_QUOTA, MIN_MEMORY, MIN_OPEN_FILES, MIN_OUTPUT_BYTES, MIN_PIDS, MIN_TMP_SIZE,
    MIN_UID_BASE, OVERFLOW_UID,
};
pub use egress::{parse_egress_rule, EgressRule};
pub use findings::Finding;
use findings::Findings;

pub fn check(p: &Policy) -> Vec<Finding> {
    let mut f = Findings::default();
    limits(p, &mut f);
    filesystem(p, &mut f);
    seccomp(p, &mut f);
    identity(p, &mut f);
    cgroup(p, &mut f);
    python(p, &mut f);
    sessions(p, &mut f);
    interpreters(p, &mut f);
    egress::check(p, &mut f);
    network::check(p, &mut f);
    secrets::check(p, &mut f);
    tasks::check(p, &mut f);
    branches::check(p, &mut f);
    f.0
}

fn limits(p: &Policy, f: &mut Findings) {
    let l = &p.limits;
    let at = |k: &str| KeyPath::new(&["limits", k]);
    for (key, d) in [("wall_time", l.wall_time), ("cpu_time", l.cpu_time)] {
        if d.0.is_zero() || d > MAX_RUN_TIME {
            f.add(
                at(key),
                format!("{d} is out of range (must be more than 0s and at most {MAX_RUN_TIME})"),
            );
        }
    }
    let at_least = |f: &mut Findings, key: &str, got: ByteSize, min: ByteSize| {
        if got < min {
            f.add(at(key), format!("{got} is too small (at least {min})"));
        }
    };
    at_least(f, "memory", l.memory, MIN_MEMORY);
    at_least(f, "tmp_size", l.tmp_size, MIN_TMP_SIZE);
    at_least(f, "output_bytes", l.output_bytes, MIN_OUTPUT_BYTES);
    if l.pids < MIN_PIDS {
        f.add(
            at("pids"),
            format!("{} is too small (at least {MIN_PIDS})", l.pids),
        );
    }
    if !(MIN_OPEN_FILES..=MAX_OPEN_FILES).contains(&l.open_files) {
        f.add(
            at("open_files"),
            format!(
                "{} is out of range (must be between {MIN_OPEN_FILES} and {MAX_OPEN_FILES})",
                l.open_files
            ),
        );
    }
    if !(l.cpus.is_finite() && l.cpus >= MIN_CPUS) {
        f.add(
            at("cpus"),
            format!(
                "{} is not a usable CPU share (must be a number of cores of at least {MIN_CPUS}, e.g. 1.0 or 0.5)",
                l.cpus
            ),
        );
    }
    if l.max_queued_runs > 100_000 {
        f.add(
            at("max_queued_runs"),
            format!("{} is out of range (at most 100000)", l.max_queued_runs),
        );
    }
    if l.max_concurrent_runs == Some(0) {
        f.add(
            at("max_concurrent_runs"),
            "0 would never run anything (at least 1; leave it out for one per core)".to_string(),
        );
    }
    if l.max_concurrent_fresh_runs == Some(0) {
        f.add(
            at("max_concurrent_fresh_runs"),
            "0 would never run a fresh interpreter (at least 1; leave it out for twice max_concurrent_runs)"
                .to_string(),
        );
    }
}

/// Why `path` is not an absolute, normalized path, if it is not.
fn path_problem(path: &Path) -> Option<String> {
    let Some(s) = path.to_str() else {
        return Some("is not valid UTF-8".to_string());
    };
    if !s.starts_with('/') {
        return Some(format!(
            "{s:?} is not an absolute path (it must start with /)"
        ));
    }
    if s.contains('\0') {
        return Some(format!("{s:?} contains a NUL byte"));
    }
    if s.len() > 1 && s.ends_with('/') {
        return Some(format!(
            "{s:?} has a trailing slash (write {:?})",
            s.trim_end_matches('/')
        ));
    }
    if s.contains("//") {
        return Some(format!("{s:?} contains an empty component (//)"));
    }
    if s.split('/').any(|c| c == "." || c == "..") {
        return Some(format!("{s:?} is not normalized (no . or .. components)"));
    }
    None
}

const FORBIDDEN_BIND_ROOTS: &[&str] = &["/proc", "/sys", "/dev", "/run"];

fn filesystem(p: &Policy, f: &mut Findings) {
    let fs = &p.filesystem;
    for (i, bind) in fs.ro_binds.iter().enumerate() {
        let at = KeyPath::new(&["filesystem", "ro_binds"]).index(i);
        if let Some(problem) = path_problem(bind) {
            f.add(at, problem);
        } else if bind == Path::new("/") {
            f.add(
                at,
                "\"/\" would expose the whole host (bind specific directories such as \"/usr\")"
                    .to_string(),
            );
        } else if let Some(root) = FORBIDDEN_BIND_ROOTS.iter().find(|r| bind.starts_with(r)) {
            f.add(
                at,
                format!(
                    "{:?} is under {root}, which the jail provides itself (not allowed: {})",
                    bind.display().to_string(),
                    FORBIDDEN_BIND_ROOTS.join(", ")
                ),
            );
        }
    }
    for (name, path) in &fs.interpreters {
        let at = KeyPath::new(&["filesystem", "interpreters", name]);
        if name.is_empty() {
            f.add(
                at.clone(),
                "an interpreter name must not be empty".to_string(),
            );
        }
        if let Some(problem) = path_problem(path) {
            f.add(at, problem);
        }
    }
    if !fs.interpreters.contains_key(&fs.default_interpreter) {
        let names: Vec<&str> = fs.interpreters.keys().map(String::as_str).collect();
        let have = if names.is_empty() {
            "filesystem.interpreters is empty".to_string()
        } else {
            format!("expected one of: {}", names.join(", "))
        };
        f.0.push(Finding {
            paths: vec![
                KeyPath::new(&["filesystem", "default_interpreter"]),
                KeyPath::new(&["filesystem", "interpreters"]),
            ],
            message: format!(
                "{:?} is not a key of filesystem.interpreters ({have})",
                fs.default_interpreter
            ),
        });
    }
}

fn seccomp(p: &Policy, f: &mut Findings) {
    for (i, name) in p.seccomp.extra_deny.iter().enumerate() {
        if !prims_syscalls::is_known(name) {
            f.add(
                KeyPath::new(&["seccomp", "extra_deny"]).index(i),
                format!("{name:?} is not an x86_64 syscall name (such as \"ptrace\" or \"mount\")"),
            );
        }
    }
}

fn identity(p: &Policy, f: &mut Findings) {
    let id = &p.identity;
    let base = u64::from(id.uid_base);
    let count = u64::from(id.uid_count);
    if id.uid_base < MIN_UID_BASE {
        f.add(
            KeyPath::new(&["identity", "uid_base"]),
            format!("{base} is a system uid (at least {MIN_UID_BASE}; never 0)"),
        );
    }
    if count == 0 {
        f.add(
            KeyPath::new(&["identity", "uid_count"]),
            "0 leaves no uid to run as (at least 1)".to_string(),
        );
    }
    let range = || {
        vec![
            KeyPath::new(&["identity", "uid_count"]),
            KeyPath::new(&["identity", "uid_base"]),
        ]
    };
    let end = base + count;
    if end > MAX_UID_END {
        f.0.push(Finding {
            paths: range(),
            message: format!(
                "uid_base + uid_count = {end} is past the largest usable uid (at most {MAX_UID_END})"
            ),
        });
    }
    if count > 0 && (base..end).contains(&OVERFLOW_UID) {
        f.0.push(Finding {
            paths: range(),
            message: format!(
                "uids {base}..{end} include {OVERFLOW_UID} (nobody), which must not own jailed processes"
            ),
        });
    }
}

fn cgroup(p: &Policy, f: &mut Findings) {
    let parent = &p.cgroup.parent;
    let at = KeyPath::new(&["cgroup", "parent"]);
    let allowed = "letters, digits, _ . / -";
    if parent.is_empty() {
        f.add(at, "must not be empty (e.g. \"prims\")".to_string());
    } else if let Some(c) = parent
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '-')))
    {
        f.add(
            at,
            format!("{parent:?} contains {c:?} (allowed: {allowed})"),
        );
    } else if parent.split('/').any(|c| c == "..") {
        f.add(
            at,
            format!("{parent:?} must not contain .. (it must stay inside the hierarchy)"),
        );
    }
}

fn no_flag_or_space(s: &str) -> Option<String> {
    if s.is_empty() {
        Some("must not be empty".to_string())
    } else if s.trim() != s {
        Some(format!("{s:?} has whitespace at the ends"))
    } else if s.starts_with('-') {
        Some(format!(
            "{s:?} starts with - and would be read as an installer option"
        ))
    } else if s.chars().any(char::is_control) {
        Some(format!("{s:?} contains a control character"))
    } else {
        None
    }
}

fn python(p: &Policy, f: &mut Findings) {
    let py = &p.python;
    let lists = [
        ("default_packages", &py.default_packages),
        ("ipython_packages", &py.ipython_packages),
        ("extra_index_urls", &py.extra_index_urls),
        ("find_links", &py.find_links),
    ];
    for (key, list) in lists {
        for (i, item) in list.iter().enumerate() {
            if let Some(problem) = no_flag_or_space(item) {
                f.add(KeyPath::new(&["python", key]).index(i), problem);
            }
        }
    }
    if !py.index_url.is_empty() {
        if let Some(problem) = no_flag_or_space(&py.index_url) {
            f.add(
                KeyPath::new(&["python", "index_url"]),
                format!("{problem} (leave it empty for uv's default index)"),
            );
        }
    }
    let t = py.build_timeout;
    if t.0.is_zero() || t > MAX_RUN_TIME {
        f.add(
            KeyPath::new(&["python", "build_timeout"]),
            format!("{t} is out of range (must be more than 0s and at most {MAX_RUN_TIME})"),
        );
    }
    if let Some(site) = &py.ipython_site {
        if !site.is_absolute() {
            f.add(
                KeyPath::new(&["python", "ipython_site"]),
                format!("{} is not an absolute path", site.display()),
            );
        }
    }
    if py.prewarm_imports.len() > MAX_PREWARM_IMPORTS {
        f.add(
            KeyPath::new(&["python", "prewarm_imports"]),
            format!(
                "{} modules; at most {MAX_PREWARM_IMPORTS}",
                py.prewarm_imports.len()
            ),
        );
    }
    for (i, m) in py.prewarm_imports.iter().enumerate() {
        if !is_module_name(m) {
            f.add(
                KeyPath::new(&["python", "prewarm_imports"]).index(i),
                format!("{m:?} is not a module name (dotted Python identifiers, such as \"pandas\" or \"matplotlib.pyplot\")"),
            );
        }
    }
    if py.warm_up_code.len() > MAX_WARM_UP_CODE {
        f.add(
            KeyPath::new(&["python", "warm_up_code"]),
            format!(
                "{} bytes; at most {MAX_WARM_UP_CODE}",
                py.warm_up_code.len()
            ),
        );
    }
    if py.build_disk < MIN_BUILD_DISK {
        f.add(
            KeyPath::new(&["python", "build_disk"]),
            format!("{} is too small (at least {MIN_BUILD_DISK})", py.build_disk),
        );
    }
    if py.build_memory < MIN_BUILD_MEMORY {
        f.add(
            KeyPath::new(&["python", "build_memory"]),
            format!(
                "{} is too small (at least {MIN_BUILD_MEMORY})",
                py.build_memory
            ),
        );
    }
}

/// Bounds of a session's recorded runs: the whole file is read for each
/// notebook and scanned after each run, so it stays modest.
const MAX_HISTORY_CELLS: u32 = 100_000;
const MIN_HISTORY_BYTES: ByteSize = ByteSize::kib(64);
const MAX_HISTORY_BYTES: ByteSize = ByteSize::mib(256);

fn sessions(p: &Policy, f: &mut Findings) {
    let s = &p.sessions;
    if s.idle_ttl.0 < Duration::from_secs(1) {
        f.add(
            KeyPath::new(&["sessions", "idle_ttl"]),
            format!("{} is too short (at least 1s)", s.idle_ttl),
        );
    }
    if s.max_sessions == 0 {
        f.add(
            KeyPath::new(&["sessions", "max_sessions"]),
            "0 would refuse every session (at least 1)".to_string(),
        );
    }
    if !(1..=MAX_HISTORY_CELLS).contains(&s.history_cells) {
        f.add(
            KeyPath::new(&["sessions", "history_cells"]),
            format!(
                "{} is out of range (at least 1, at most {MAX_HISTORY_CELLS})",
                s.history_cells
            ),
        );
    }
    if s.history_bytes < MIN_HISTORY_BYTES || s.history_bytes > MAX_HISTORY_BYTES {
        f.add(
            KeyPath::new(&["sessions", "history_bytes"]),
            format!(
                "{} is out of range (at least {MIN_HISTORY_BYTES}, at most {MAX_HISTORY_BYTES})",
                s.history_bytes
            ),
        );
    }
    if s.quota == SessionQuota::Loop && s.disk_quota < MIN_DISK_QUOTA {
        f.add(
            KeyPath::new(&["sessions", "disk_quota"]),
            format!(
                "{} is too small for a workspace image (at least {MIN_DISK_QUOTA})",
                s.disk_quota
            ),
        );
    }
}

/// A dotted name of ASCII identifiers: what `import` accepts, and nothing
/// the agent could mistake for code.
fn is_module_name(m: &str) -> bool {
    m.len() <= 200
        && m.split('.').all(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

fn interpreters(p: &Policy, f: &mut Findings) {
    let i = &p.interpreters;
    if i.idle_ttl.0 < Duration::from_secs(1) || i.idle_ttl > MAX_RUN_TIME {
        f.add(
            KeyPath::new(&["interpreters", "idle_ttl"]),
            format!(
                "{} is out of range (at least 1s, at most {MAX_RUN_TIME})",
                i.idle_ttl
            ),
        );
    }
    for (key, v) in [
        ("max_live", i.max_live),
        ("max_live_per_tenant", i.max_live_per_tenant),
    ] {
        if v == 0 {
            f.add(
                KeyPath::new(&["interpreters", key]),
                "0 would leave no interpreter for any call (at least 1)".to_string(),
            );
        }
    }
    if i.pool_size > MAX_POOL_SIZE {
        f.add(
            KeyPath::new(&["interpreters", "pool_size"]),
            format!("{} is too large (at most {MAX_POOL_SIZE})", i.pool_size),
        );
    }
    let g = i.interrupt_grace;
    if g.0 < Duration::from_millis(10) || g > MAX_INTERRUPT_GRACE {
        f.add(
            KeyPath::new(&["interpreters", "interrupt_grace"]),
            format!("{g} is out of range (at least 10ms, at most {MAX_INTERRUPT_GRACE})"),
        );
    }
    let s = i.save_timeout;
    if s.0 < Duration::from_millis(100) || s > MAX_SAVE_TIMEOUT {
        f.add(
            KeyPath::new(&["interpreters", "save_timeout"]),
            format!("{s} is out of range (at least 100ms, at most {MAX_SAVE_TIMEOUT})"),
        );
    }
    if i.autosave_after > MAX_AUTOSAVE_AFTER {
        f.add(
            KeyPath::new(&["interpreters", "autosave_after"]),
            format!(
                "{} is too long (at most {MAX_AUTOSAVE_AFTER}; 0s turns autosave off)",
                i.autosave_after
            ),
        );
    }
    if i.max_templates == 0 || i.max_templates > MAX_POOL_SIZE {
        f.add(
            KeyPath::new(&["interpreters", "max_templates"]),
            format!(
                "{} is out of range (at least 1, at most {MAX_POOL_SIZE})",
                i.max_templates
            ),
        );
    }
    if i.template_memory.0 < 64 << 20 {
        f.add(
            KeyPath::new(&["interpreters", "template_memory"]),
            format!("{} is too small (at least 64MiB)", i.template_memory),
        );
    }
    if i.template_max_age.0 < Duration::from_secs(60) {
        f.add(
            KeyPath::new(&["interpreters", "template_max_age"]),
            format!("{} is too short (at least 1m)", i.template_max_age),
        );
    }
    if i.template_max_children == 0 {
        f.add(
            KeyPath::new(&["interpreters", "template_max_children"]),
            "0 is too few (at least 1)".to_string(),
        );
    }
}
