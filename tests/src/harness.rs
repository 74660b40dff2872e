//! Locating the built binaries, the root check, and [`Job`]: one
//! `prims run` invocation with its script, policy and options.

use crate::child::{run_with_timeout, RawOutput};
use crate::outcome::Run;
use crate::python::PY_PRELUDE;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// How long any one prims invocation may take before the helper kills it.
pub const HARD_TIMEOUT: Duration = Duration::from_secs(90);

/// The default policy of [`Job::new`]: a short wall clock so a hung test
/// ends quickly.
pub const DEFAULT_POLICY: &str = "[limits]\nwall_time = \"10s\"\n";

/// The IPython layer the tests bind into their interpreters' jails
/// (`python.ipython_site`): `$PRIMS_IPYTHON_SITE`, else
/// `/var/lib/prims-tests/ipython-site`, which `scripts/ipython-site.sh`
/// makes (`scripts/test.sh` runs it first). Outside the checkout, whose
/// path no jail may name.
pub fn ipython_site() -> PathBuf {
    let site = std::env::var_os("PRIMS_IPYTHON_SITE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/lib/prims-tests/ipython-site"));
    assert!(
        site.join("IPython").is_dir(),
        "{} has no IPython: run scripts/ipython-site.sh (scripts/test.sh does) \
         before the tests that start live interpreters",
        site.display()
    );
    site
}

/// The `[python]` key that gives interpreters the tests' IPython layer.
pub fn ipython_site_key() -> String {
    format!(
        "ipython_site = {:?}\n",
        ipython_site().display().to_string()
    )
}

/// A `[python]` table that gives interpreters the tests' IPython layer.
pub fn ipython_policy() -> String {
    format!("[python]\n{}", ipython_site_key())
}

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

/// One uv for every test process, installed with the host's pip into
/// `target/<profile>/prims-test-uv` the first time: for supervisors whose
/// package index has none (a test's own), and for the supervisor's own
/// environment tests.
pub fn shared_uv() -> &'static Path {
    static UV: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    UV.get_or_init(|| {
        let target = target_dir();
        let dir = target.join("prims-test-uv");
        let uv = dir.join("bin/uv");
        if uv.is_file() {
            return uv;
        }
        let tmp = tempfile::Builder::new()
            .prefix(".prims-test-uv-")
            .tempdir_in(&target)
            .expect("tempdir");
        let out = Command::new("/usr/bin/python3")
            .args(["-m", "pip", "install", "--only-binary", ":all:", "--quiet"])
            .arg("--target")
            .arg(tmp.path())
            .arg("uv")
            .env_remove("PIP_FIND_LINKS")
            .output()
            .expect("running pip");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Another test process may have won the race; either copy works.
        let _ = std::fs::rename(tmp.path(), &dir);
        assert!(uv.is_file(), "{} is missing", uv.display());
        uv
    })
}

/// Names the directory that holds `prims` and `prims-jailer` when it is not
/// [`target_dir`]: the VM stage (`scripts/vm-check.sh`) ships the test
/// executables without their target directory.
pub const BIN_DIR_ENV: &str = "PRIMS_TEST_BIN_DIR";

/// Where [`prims_bin`] and [`jailer_bin`] are: `$PRIMS_TEST_BIN_DIR`, else
/// [`target_dir`].
pub fn bin_dir() -> PathBuf {
    match std::env::var_os(BIN_DIR_ENV) {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => target_dir(),
    }
}

fn built_binary(name: &str) -> PathBuf {
    let p = bin_dir().join(name);
    if !p.is_file() {
        panic!(
            "{} is missing: run `cargo build --workspace` first (or set {BIN_DIR_ENV})",
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

/// Which interpreter every [`Job`] runs its script in, the catalogue's
/// mode: `forked` (the default, as the server starts interpreters), `cold`,
/// `in-place` or `one-shot`.
pub const MODE_ENV: &str = "PRIMS_TEST_MODE";

/// The modes of [`MODE_ENV`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `prims run --live --forked`: the one cell of an interpreter forked
    /// from a fork template started for the run.
    Forked,
    /// `prims run --live --forked --in-place`: the first cell of a fresh
    /// python forked in place of a template's child, in that child's jail,
    /// as a `fresh: true` call gets it.
    InPlace,
    /// `prims run --live`: the one cell of an interpreter started cold, the
    /// server's fallback.
    Cold,
    /// `prims run`: the jail alone, the script as python's main program.
    OneShot,
}

/// The mode [`MODE_ENV`] names; an unknown one fails loudly.
pub fn mode() -> Mode {
    match std::env::var(MODE_ENV).as_deref() {
        Err(_) | Ok("") | Ok("forked") => Mode::Forked,
        Ok("in-place") => Mode::InPlace,
        Ok("cold") => Mode::Cold,
        Ok("one-shot") => Mode::OneShot,
        Ok(other) => panic!("{MODE_ENV}={other}: one of forked, in-place, cold, one-shot"),
    }
}

/// Jobs run against live interpreters (every mode but one-shot).
pub fn live_mode() -> bool {
    mode() != Mode::OneShot
}

/// Jobs run in interpreters forked from a template.
pub fn forked_mode() -> bool {
    matches!(mode(), Mode::Forked | Mode::InPlace)
}

/// Jobs run in pythons forked in place.
pub fn in_place_mode() -> bool {
    mode() == Mode::InPlace
}

/// A policy with just a wall time, plus `extra` appended verbatim.
pub fn policy_with(wall: &str, extra: &str) -> String {
    format!("[limits]\nwall_time = \"{wall}\"\n{extra}")
}

/// One `prims run` invocation.
#[derive(Debug, Clone)]
pub struct Job {
    code: String,
    policy: Option<String>,
    workspace: Option<PathBuf>,
    json: bool,
    live: bool,
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
            live: false,
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

    /// Run with `--live`, whatever [`MODE_ENV`] says.
    pub fn live(mut self) -> Job {
        self.live = true;
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
        if self.live || live_mode() {
            cmd.arg("--live");
        }
        if forked_mode() {
            cmd.arg("--forked");
        }
        if in_place_mode() {
            cmd.arg("--in-place");
        }
        if let Some(p) = &self.policy {
            let pf = dir.path().join("policy.toml");
            // A live cell runs through IPython, as the daemon's do.
            let p = if self.live || live_mode() {
                crate::policy::with_defaults(p, &ipython_policy())
            } else {
                p.clone()
            };
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

/// The egress proxy's account (`prims-egress`), created if missing, for
/// tests and benchmarks that start a proxy without a supervisor.
pub fn egress_account() -> prims_supervisor::egress::Account {
    use prims_supervisor::accounts::{egress_account, EGRESS_USER};
    require_root();
    let ids = egress_account(EGRESS_USER, &[]).expect("the egress proxy's account");
    prims_supervisor::egress::Account {
        uid: ids.uid,
        gid: ids.gid,
    }
}
