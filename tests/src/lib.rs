//! Helpers for end-to-end tests.
//!
//! Every test drives the real binaries: `target/debug/prims run --json` runs a
//! Python script inside the jail and prints one JSON outcome. The helpers here
//! write the script and the policy to a private temp directory, run prims with
//! a hard timeout, parse the outcome, and give the tests small assertion
//! helpers. Python probes print one line per check:
//!
//! - `SC <name> <return> <errno>` for a raw `syscall(2)` made through ctypes
//!   (see [`PY_PRELUDE`]);
//! - `ERR <name> <errno>` or `ERR <name> ok` for a Python call that may raise
//!   `OSError`;
//! - `KV <name> <value...>` for any other observation.
//!
//! The Rust side parses those lines and asserts exact values, collecting every
//! mismatch of a test before failing so one run reports all of them.

use base64::Engine as _;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Python code every probe script starts with.
///
/// `sc(name, nr, *args)` makes a raw syscall with every argument passed as a
/// C `long` and prints `SC name ret errno`. `err(name, fn, *args)` calls a
/// Python function and prints `ERR name errno` when it raises `OSError`, or
/// `ERR name ok` when it returns. `kv(name, *values)` prints `KV name values`.
/// `W` is bubblewrap's "wrong pointer": a non-NULL address that is never
/// mapped, so a kernel that looks at the argument fails with EFAULT.
pub const PY_PRELUDE: &str = r#"
import ctypes, os, sys, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
W = 1
def sc(name, nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    print("SC", name, r, ctypes.get_errno(), flush=True)
    return r
def err(name, fn, *args, **kwargs):
    try:
        r = fn(*args, **kwargs)
    except OSError as e:
        print("ERR", name, e.errno, flush=True)
        return None
    print("ERR", name, "ok", flush=True)
    return r
def kv(name, *values):
    print("KV", name, *values, flush=True)
"#;

/// How long any one prims invocation may take before the helper kills it.
pub const HARD_TIMEOUT: Duration = Duration::from_secs(90);

/// The default policy of [`Job::new`]: a short wall clock so a hung test
/// ends quickly.
pub const DEFAULT_POLICY: &str = "[limits]\nwall_time = \"10s\"\n";

/// Panics unless the test process is root: the jail needs it.
pub fn require_root() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        panic!(
            "the PRIMS end-to-end tests must run as root (euid is {euid}): \
             the jailer creates namespaces, cgroups and uid maps"
        );
    }
}

/// `target/debug` (or whichever profile dir holds the test executable).
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    // target/debug/deps/<test>-<hash>: up two levels is target/debug.
    exe.parent()
        .and_then(Path::parent)
        .expect("test executable lives in target/<profile>/deps")
        .to_path_buf()
}

fn built_binary(name: &str) -> PathBuf {
    let p = target_dir().join(name);
    if !p.is_file() {
        panic!(
            "{} is missing: run `cargo build --workspace` first",
            p.display()
        );
    }
    p
}

/// Path of the `prims` CLI binary.
pub fn prims_bin() -> PathBuf {
    built_binary("prims")
}

/// Path of the `prims-jailer` binary.
pub fn jailer_bin() -> PathBuf {
    built_binary("prims-jailer")
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A marker unique to this test process and call: `<tag>-<pid>-<n>-<nanos>`.
pub fn unique(tag: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("prims-{tag}-{}-{n}-{nanos}", std::process::id())
}

/// What a child process did.
#[derive(Debug, Clone)]
pub struct RawOutput {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// The helper killed the child after [`HARD_TIMEOUT`] (or the given timeout).
    pub killed_by_helper: bool,
    pub elapsed: Duration,
}

impl RawOutput {
    pub fn stdout_str(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
    pub fn stderr_str(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
    pub fn describe(&self) -> String {
        format!(
            "exit code {:?}, signal {:?}, killed_by_helper {}, elapsed {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.code,
            self.signal,
            self.killed_by_helper,
            self.elapsed,
            clip(&self.stdout_str(), 6000),
            clip(&self.stderr_str(), 6000)
        )
    }
}

fn clip(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... [{} more bytes]", &s[..end], s.len() - end)
}

/// Runs `cmd` with stdin from /dev/null, collecting stdout and stderr, and
/// kills it (by its own pid) after `timeout`.
pub fn run_with_timeout(mut cmd: Command, timeout: Duration) -> RawOutput {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot spawn {cmd:?}: {e}"));
    let mut out = child.stdout.take().expect("stdout pipe");
    let mut err = child.stderr.take().expect("stderr pipe");
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let mut killed = false;
    let status = loop {
        match child.try_wait().expect("try_wait") {
            Some(st) => break st,
            None => {
                if start.elapsed() > timeout && !killed {
                    let _ = child.kill();
                    killed = true;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    };
    let elapsed = start.elapsed();
    let stdout = t_out.join().expect("stdout reader");
    let stderr = t_err.join().expect("stderr reader");
    RawOutput {
        code: status.code(),
        signal: status.signal(),
        stdout,
        stderr,
        killed_by_helper: killed,
        elapsed,
    }
}

/// Runs `code` with the host's `/usr/bin/python3 -I -c`, outside any jail, as
/// the test user (root). Used to show that a probe's result in the jail is
/// due to the jail.
pub fn host_python(code: &str) -> RawOutput {
    let mut cmd = Command::new("/usr/bin/python3");
    cmd.arg("-I").arg("-c").arg(code);
    run_with_timeout(cmd, Duration::from_secs(30))
}

/// One `prims run` invocation.
#[derive(Debug, Clone)]
pub struct Job {
    code: String,
    policy: Option<String>,
    workspace: Option<PathBuf>,
    json: bool,
    envs: Vec<(String, String)>,
    extra_args: Vec<String>,
    core_unlimited: bool,
}

impl Job {
    /// A job running `code` with [`DEFAULT_POLICY`] and `--json`.
    pub fn new(code: impl Into<String>) -> Job {
        Job {
            code: code.into(),
            policy: Some(DEFAULT_POLICY.to_string()),
            workspace: None,
            json: true,
            envs: Vec::new(),
            extra_args: Vec::new(),
            core_unlimited: false,
        }
    }

    /// A job whose code starts with [`PY_PRELUDE`].
    pub fn probe(code: &str) -> Job {
        Job::new(format!("{PY_PRELUDE}\n{code}"))
    }

    /// Replace the policy file's text.
    pub fn policy(mut self, toml: impl Into<String>) -> Job {
        self.policy = Some(toml.into());
        self
    }

    /// Run without `--policy` (the built-in default policy).
    pub fn no_policy(mut self) -> Job {
        self.policy = None;
        self
    }

    pub fn workspace(mut self, dir: impl Into<PathBuf>) -> Job {
        self.workspace = Some(dir.into());
        self
    }

    /// Run without `--json`.
    pub fn raw(mut self) -> Job {
        self.json = false;
        self
    }

    /// Set an environment variable on the prims process.
    pub fn env(mut self, k: &str, v: &str) -> Job {
        self.envs.push((k.to_string(), v.to_string()));
        self
    }

    /// Start prims with `RLIMIT_CORE` raised to unlimited, so a core limit of
    /// (0, 0) seen in the jail must have been set by the jail.
    pub fn core_unlimited(mut self) -> Job {
        self.core_unlimited = true;
        self
    }

    pub fn arg(mut self, a: &str) -> Job {
        self.extra_args.push(a.to_string());
        self
    }

    /// Runs prims and returns what the process did, without parsing.
    pub fn run_raw(&self) -> RawOutput {
        require_root();
        let prims = prims_bin();
        let _ = jailer_bin();
        let dir = tempfile::Builder::new()
            .prefix("prims-test-input-")
            .tempdir()
            .expect("tempdir");
        let script = dir.path().join("script.py");
        std::fs::write(&script, &self.code).expect("write script");
        let mut cmd = Command::new(prims);
        cmd.arg("run");
        if self.json {
            cmd.arg("--json");
        }
        if let Some(p) = &self.policy {
            let pf = dir.path().join("policy.toml");
            std::fs::write(&pf, p).expect("write policy");
            cmd.arg("--policy").arg(pf);
        }
        if let Some(w) = &self.workspace {
            cmd.arg("--workspace").arg(w);
        }
        for a in &self.extra_args {
            cmd.arg(a);
        }
        cmd.arg(&script);
        for (k, v) in &self.envs {
            cmd.env(k, v);
        }
        if self.core_unlimited {
            use std::os::unix::process::CommandExt;
            // SAFETY: setrlimit is async-signal-safe and touches no memory
            // shared with the parent.
            unsafe {
                cmd.pre_exec(|| {
                    let lim = libc::rlimit {
                        rlim_cur: libc::RLIM_INFINITY,
                        rlim_max: libc::RLIM_INFINITY,
                    };
                    if libc::setrlimit(libc::RLIMIT_CORE, &lim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        run_with_timeout(cmd, HARD_TIMEOUT)
    }

    /// Runs prims with `--json` and parses the outcome. Panics, showing the
    /// raw output, when prims printed no JSON object.
    pub fn run(&self) -> Run {
        assert!(self.json, "Job::run needs --json; use run_raw");
        let raw = self.run_raw();
        if raw.killed_by_helper {
            panic!(
                "prims did not finish within {:?} and was killed:\n{}",
                HARD_TIMEOUT,
                raw.describe()
            );
        }
        let json: Value = match serde_json::from_slice(raw.stdout.trim_ascii()) {
            Ok(v) => v,
            Err(e) => panic!(
                "prims --json did not print one JSON object ({e}):\n{}",
                raw.describe()
            ),
        };
        if !json.is_object() {
            panic!("prims --json printed a non-object:\n{}", raw.describe());
        }
        Run { raw, json }
    }
}

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

    /// Start collecting checks against this run.
    pub fn checks(&self) -> Checks<'_> {
        Checks {
            run: self,
            failures: Vec::new(),
            seen: Vec::new(),
        }
    }
}

/// Collects mismatches so one failing test reports every one of them.
pub struct Checks<'a> {
    run: &'a Run,
    failures: Vec<String>,
    seen: Vec<String>,
}

impl Checks<'_> {
    /// The syscall probe `name` returned -1 with exactly `errno`.
    pub fn sc_errno(&mut self, name: &str, errno: i32) -> &mut Self {
        match self.run.syscalls().get(name) {
            None => self
                .failures
                .push(format!("{name}: no SC line (python died before it?)")),
            Some(&(r, e)) => {
                self.seen
                    .push(format!("{name}: ret {r} errno {e} ({})", errno_name(e)));
                if r != -1 || e != errno {
                    self.failures.push(format!(
                        "{name}: expected -1 {} ({errno}), observed ret {r} errno {} ({e})",
                        errno_name(errno),
                        errno_name(e)
                    ));
                }
            }
        }
        self
    }

    /// The syscall probe `name` succeeded (returned >= 0).
    pub fn sc_ok(&mut self, name: &str) -> &mut Self {
        match self.run.syscalls().get(name) {
            None => self.failures.push(format!("{name}: no SC line")),
            Some(&(r, e)) => {
                self.seen.push(format!("{name}: ret {r} errno {e}"));
                if r < 0 {
                    self.failures.push(format!(
                        "{name}: expected success, observed ret {r} errno {} ({e})",
                        errno_name(e)
                    ));
                }
            }
        }
        self
    }

    /// The Python call `name` raised OSError with exactly `errno`.
    pub fn os_errno(&mut self, name: &str, errno: i32) -> &mut Self {
        match self.run.errors().get(name) {
            None => self.failures.push(format!("{name}: no ERR line")),
            Some(None) => {
                self.seen.push(format!("{name}: succeeded"));
                self.failures.push(format!(
                    "{name}: expected OSError {} ({errno}), but the call succeeded",
                    errno_name(errno)
                ))
            }
            Some(Some(e)) => {
                self.seen
                    .push(format!("{name}: errno {e} ({})", errno_name(*e)));
                if *e != errno {
                    self.failures.push(format!(
                        "{name}: expected {} ({errno}), observed {} ({e})",
                        errno_name(errno),
                        errno_name(*e)
                    ))
                }
            }
        }
        self
    }

    /// The Python call `name` did not raise.
    pub fn os_ok(&mut self, name: &str) -> &mut Self {
        match self.run.errors().get(name) {
            None => self.failures.push(format!("{name}: no ERR line")),
            Some(None) => self.seen.push(format!("{name}: succeeded")),
            Some(Some(e)) => self.failures.push(format!(
                "{name}: expected success, observed {} ({e})",
                errno_name(*e)
            )),
        }
        self
    }

    /// `KV name` equals `value`.
    pub fn kv_eq(&mut self, name: &str, value: &str) -> &mut Self {
        match self.run.kv(name) {
            None => self.failures.push(format!("{name}: no KV line")),
            Some(v) if v == value => self.seen.push(format!("{name}: {v}")),
            Some(v) => self
                .failures
                .push(format!("{name}: expected {value:?}, observed {v:?}")),
        }
        self
    }

    /// Record a free-form check.
    pub fn check(&mut self, ok: bool, what: impl Into<String>) -> &mut Self {
        let what = what.into();
        if ok {
            self.seen.push(what);
        } else {
            self.failures.push(what);
        }
        self
    }

    /// Panics listing every failure, with the run's outcome.
    pub fn finish(&mut self) {
        if !self.failures.is_empty() {
            let mut msg = String::new();
            let _ = writeln!(msg, "{} check(s) failed:", self.failures.len());
            for f in &self.failures {
                let _ = writeln!(msg, "  - {f}");
            }
            let _ = writeln!(msg, "checks that passed:");
            for s in &self.seen {
                let _ = writeln!(msg, "  + {s}");
            }
            panic!("{msg}\n{}", self.run.describe());
        }
    }
}

/// `EPERM (1)` style names for messages.
pub fn errno_name(e: i32) -> &'static str {
    match e {
        0 => "0",
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ESRCH => "ESRCH",
        libc::EINTR => "EINTR",
        libc::EIO => "EIO",
        libc::ENXIO => "ENXIO",
        libc::E2BIG => "E2BIG",
        libc::ENOEXEC => "ENOEXEC",
        libc::EBADF => "EBADF",
        libc::ECHILD => "ECHILD",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::EXDEV => "EXDEV",
        libc::ENODEV => "ENODEV",
        libc::ENOTDIR => "ENOTDIR",
        libc::EISDIR => "EISDIR",
        libc::EINVAL => "EINVAL",
        libc::ENFILE => "ENFILE",
        libc::EMFILE => "EMFILE",
        libc::ENOTTY => "ENOTTY",
        libc::ETXTBSY => "ETXTBSY",
        libc::EFBIG => "EFBIG",
        libc::ENOSPC => "ENOSPC",
        libc::ESPIPE => "ESPIPE",
        libc::EROFS => "EROFS",
        libc::EMLINK => "EMLINK",
        libc::EPIPE => "EPIPE",
        libc::ERANGE => "ERANGE",
        libc::ENOSYS => "ENOSYS",
        libc::ELOOP => "ELOOP",
        libc::ENOTSUP => "EOPNOTSUPP",
        libc::EAFNOSUPPORT => "EAFNOSUPPORT",
        libc::EPROTONOSUPPORT => "EPROTONOSUPPORT",
        libc::EADDRINUSE => "EADDRINUSE",
        libc::EADDRNOTAVAIL => "EADDRNOTAVAIL",
        libc::ENETDOWN => "ENETDOWN",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::EHOSTUNREACH => "EHOSTUNREACH",
        libc::EDQUOT => "EDQUOT",
        libc::ENOTSOCK => "ENOTSOCK",
        _ => "?",
    }
}

/// Host processes (other than this one) whose `/proc/<pid>/cmdline`
/// contains `marker`, as `(pid, cmdline)`.
pub fn processes_with_marker(marker: &str) -> Vec<(i32, String)> {
    let me = std::process::id() as i32;
    let mut found = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return found;
    };
    for ent in rd.flatten() {
        let Ok(pid) = ent.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(cmd) = std::fs::read(ent.path().join("cmdline")) else {
            continue;
        };
        if cmd.windows(marker.len()).any(|w| w == marker.as_bytes()) {
            let s = String::from_utf8_lossy(&cmd).replace('\0', " ");
            found.push((pid, s));
        }
    }
    found
}

/// Fails the test if any process carrying `marker` survives; first SIGKILLs
/// those processes (they were started by this test) so nothing is left over.
pub fn assert_no_survivors(marker: &str, context: &str) {
    let found = processes_with_marker(marker);
    if found.is_empty() {
        return;
    }
    for (pid, _) in &found {
        // SAFETY: plain kill(2) of a process this test's job started.
        unsafe {
            libc::kill(*pid, libc::SIGKILL);
        }
    }
    panic!(
        "{} process(es) with marker {marker} survived the run ({context}): {found:?} \
         (the test has now SIGKILLed them)",
        found.len()
    );
}

/// A fresh directory for a `--workspace`, removed on drop.
pub fn workspace_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("prims-test-ws-")
        .tempdir()
        .expect("tempdir")
}

/// `stat(2)` owner of a path without following a final symlink.
pub fn owner(p: &Path) -> (u32, u32) {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(p).unwrap_or_else(|e| panic!("lstat {}: {e}", p.display()));
    (m.uid(), m.gid())
}

/// A policy with just a wall time, plus `extra` appended verbatim.
pub fn policy_with(wall: &str, extra: &str) -> String {
    format!("[limits]\nwall_time = \"{wall}\"\n{extra}")
}

/// Python literal for a str.
pub fn py_str(s: &str) -> String {
    let mut out = String::from("'");
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// Python probe bodies shared by the jail tests and the host control test.
/// Each one only makes calls that are harmless when run as root on the host
/// (garbage arguments that the kernel rejects before acting), so the control
/// test can show the jail, not the arguments, produces the EPERM.
pub mod probes {
    /// Nested namespaces. Every `clone` also sets `CLONE_SIGHAND` without
    /// `CLONE_VM`, which the kernel rejects with EINVAL before it looks at
    /// permissions: EPERM can only come from seccomp. `unshare` comes last
    /// because on the host it succeeds and moves the prober into a new userns.
    pub const NESTED_NS: &str = r#"
sc("setns_newuser", 308, -1, 0x10000000)
for _n, _f in [("newns", 0x20000), ("newcgroup", 0x02000000), ("newuts", 0x04000000),
               ("newipc", 0x08000000), ("newuser", 0x10000000), ("newpid", 0x20000000),
               ("newnet", 0x40000000)]:
    sc("clone_" + _n, 56, _f | 0x800 | 17, 0, 0, 0, 0)
sc("clone3", 435, W, 88)
sc("unshare_newuser", 272, 0x10000000)
"#;

    /// The mount family, with a wrong pointer for every path.
    pub const MOUNT: &str = r#"
sc("mount", 165, W, W, W, 0, 0)
sc("umount2", 166, W, 0)
sc("pivot_root", 155, W, W)
sc("chroot", 161, W)
sc("open_tree", 428, -1, W, 0)
sc("move_mount", 429, -1, W, -1, W, 0)
sc("fsopen", 430, W, 0)
sc("fsconfig", 431, -1, 0, 0, 0, 0)
sc("fsmount", 432, -1, 0, 0)
sc("fspick", 433, -1, W, 0)
sc("mount_setattr", 442, -1, W, 0, W, 0)
"#;
    pub const MOUNT_NAMES: &[&str] = &[
        "mount",
        "umount2",
        "pivot_root",
        "chroot",
        "open_tree",
        "move_mount",
        "fsopen",
        "fsconfig",
        "fsmount",
        "fspick",
        "mount_setattr",
    ];

    /// The kernel-surface row of the catalogue.
    pub const KERNEL_SURFACE: &str = r#"
sc("io_uring_setup", 425, 1, W)
sc("io_uring_enter", 426, -1, 0, 0, 0, 0, 0)
sc("io_uring_register", 427, -1, 0, 0, 0)
sc("userfaultfd", 323, 0xffff0000)
sc("perf_event_open", 298, W, 0, -1, -1, 0)
sc("bpf", 321, 0, W, 72)
sc("keyctl", 250, 0xffff, 0, 0, 0, 0)
sc("add_key", 248, W, W, 0, 0, 0)
sc("request_key", 249, W, W, 0, 0)
sc("kexec_load", 246, 0, 1000, 0, 0)
sc("kexec_file_load", 320, -1, -1, 0, W, 0)
sc("init_module", 175, W, 0, W)
sc("finit_module", 313, -1, W, 0)
sc("delete_module", 176, W, 0)
sc("reboot", 169, 0, 0, 0, 0)
sc("open_by_handle_at", 304, -1, W, 0)
sc("name_to_handle_at", 303, -1, W, W, W, 0)
"#;
    pub const KERNEL_SURFACE_NAMES: &[&str] = &[
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
        "userfaultfd",
        "perf_event_open",
        "bpf",
        "keyctl",
        "add_key",
        "request_key",
        "kexec_load",
        "kexec_file_load",
        "init_module",
        "finit_module",
        "delete_module",
        "reboot",
        "open_by_handle_at",
        "name_to_handle_at",
    ];

    /// The rest of the deny list in jail-hardening.md (host-safe arguments;
    /// `vhangup` is jail-only, see [`DENY_REST_JAIL_ONLY`]).
    pub const DENY_REST: &str = r#"
sc("process_vm_writev", 311, os.getpid(), 0, 0, 0, 0, 1)
sc("pidfd_getfd", 438, -1, 0, 0)
sc("swapon", 167, W, 0)
sc("swapoff", 168, W)
sc("syslog", 103, 0xff, 0, 0)
sc("acct", 163, W)
sc("quotactl", 179, 0, W, 0, 0)
sc("quotactl_fd", 443, -1, 0, 0, 0)
sc("settimeofday", 164, W, W)
sc("clock_settime", 227, 0xffff, W)
sc("clock_adjtime", 305, 0xffff, W)
sc("adjtimex", 159, W)
sc("sethostname", 170, W, 1000)
sc("setdomainname", 171, W, 1000)
sc("iopl", 172, 4)
sc("ioperm", 173, 0x10000, 1, 1)
sc("modify_ldt", 154, 0xff, 0, 0)
sc("lookup_dcookie", 212, 0, 0, 0)
sc("uselib", 134, W)
sc("ustat", 136, 0, W)
sc("sysfs", 139, 0xff, 0, 0)
sc("fanotify_init", 300, 0xffffffff, 0)
sc("mbind", 237, 0, 0, 0xff, 0, 0, 0)
sc("set_mempolicy", 238, 0xff, 0, 0)
sc("migrate_pages", 256, -1, 0, 0, 0)
sc("move_pages", 279, -1, 0, 0, 0, 0, 0)
"#;
    pub const DENY_REST_NAMES: &[&str] = &[
        "process_vm_writev",
        "pidfd_getfd",
        "swapon",
        "swapoff",
        "syslog",
        "acct",
        "quotactl",
        "quotactl_fd",
        "settimeofday",
        "clock_settime",
        "clock_adjtime",
        "adjtimex",
        "sethostname",
        "setdomainname",
        "iopl",
        "ioperm",
        "modify_ldt",
        "lookup_dcookie",
        "uselib",
        "ustat",
        "sysfs",
        "fanotify_init",
        "mbind",
        "set_mempolicy",
        "migrate_pages",
        "move_pages",
    ];
    /// Denied calls that must never run on the host as root.
    pub const DENY_REST_JAIL_ONLY: &str = r#"
sc("vhangup", 153)
"#;

    /// ioctl TIOCSTI/TIOCLINUX, including bubblewrap's CVE-2019-10063 form
    /// with garbage in the upper 32 bits, on fd -1 so the host sees EBADF.
    pub const TIOCSTI_HOST: &str = r#"
sc("tiocsti_hi", 16, -1, (1 << 32) | 0x5412, W)
sc("tiocsti", 16, -1, 0x5412, W)
sc("tioclinux", 16, -1, 0x541C, W)
"#;

    /// Sockets of families the default policy forbids.
    pub const SOCKETS: &str = r#"
sc("af_packet", 41, 17, 3, 0)
sc("af_vsock", 41, 40, 1, 0)
sc("af_alg", 41, 38, 5, 0)
sc("af_netlink", 41, 16, 3, 0)
sc("af_inet", 41, 2, 1, 0)
sc("af_inet6", 41, 10, 1, 0)
sc("af_unix", 41, 1, 1, 0)
"#;

    /// The x32 bypass: getpid with the x32 bit set.
    pub const X32: &str = r#"
sc("x32_getpid", 0x40000000 | 39)
"#;

    /// i386 `int 0x80` from an RWX page: prints `mapped`, then `returned`
    /// with the result if the process survives, or `mmap_failed <errno>`.
    pub const INT80: &str = r#"
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_addr = libc.mmap(None, 4096, 7, 0x22, -1, 0)
if _addr is None or _addr == ctypes.c_void_p(-1).value:
    print("mmap_failed", ctypes.get_errno(), flush=True)
else:
    _code = bytes([0xb8, 20, 0, 0, 0, 0xcd, 0x80, 0xc3])  # mov eax,20 (i386 getpid); int 0x80; ret
    ctypes.memmove(_addr, _code, len(_code))
    print("mapped", flush=True)
    _f = ctypes.CFUNCTYPE(ctypes.c_int)(_addr)
    print("returned", _f(), os.getpid(), flush=True)
"#;
}
