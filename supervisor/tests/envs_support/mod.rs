//! Helpers shared by the `envs_*` tests: root check, the jailer, one uv
//! per test process, and a cache in a fresh state dir.
#![allow(dead_code)]

use prims_policy::Policy;
use prims_supervisor::egress::EgressProxy;
use prims_supervisor::envs::{EnvConfig, Envs};
use prims_supervisor::job::{Jails, JobNames, Parents, RunResult};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub const BUILD_UID: u32 = 201_000;
pub const RUN_UID: u32 = 201_001;
pub const INTERPRETER: &str = "/usr/bin/python3.11";

pub fn require_root() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(euid, 0, "the environment tests must run as root");
}

/// `target/<profile>/prims-jailer`, found from this test executable.
pub fn jailer() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("test executable lives in target/<profile>/deps");
    let p = dir.join("prims-jailer");
    assert!(
        p.is_file(),
        "{} is missing: run `cargo build --workspace` first",
        p.display()
    );
    p
}

/// One uv for all test runs (the end-to-end tests' own), so most tests do
/// not each install their own (one test does, through `Envs`).
pub fn shared_uv() -> &'static Path {
    prims_tests::harness::shared_uv()
}

pub struct Fixture {
    pub state: tempfile::TempDir,
    pub envs: Arc<Envs>,
}

/// Environments and build volumes are mounts: detach them before the
/// directory goes, or the test leaves loop devices behind.
impl Drop for Fixture {
    fn drop(&mut self) {
        prims_tests::teardown::unmount_below(self.state.path());
    }
}

/// A `[python]` section; builds get a 1 GiB volume unless `extra` says.
pub fn policy(extra: &str) -> Policy {
    let disk = if extra.contains("build_disk") {
        ""
    } else {
        "build_disk = \"1GiB\"\n"
    };
    Policy::from_toml_str(&format!("[python]\n{disk}{extra}\n")).expect("test policy")
}

/// A cache in a fresh state dir; `seed_uv` copies the shared uv into it.
pub fn fixture(policy: &Policy, seed_uv: bool) -> Fixture {
    require_root();
    let state = tempfile::tempdir().expect("tempdir");
    if seed_uv {
        let bin = state.path().join("tools/bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::copy(shared_uv(), bin.join("uv")).unwrap();
    }
    let envs = Envs::new(config(state.path()), policy).expect("Envs::new");
    Fixture {
        state,
        envs: Arc::new(envs),
    }
}

/// The jailer, with no cgroups.
pub fn jails() -> Jails {
    Jails {
        jailer: jailer(),
        parents: Parents::none(),
        names: JobNames::of_process(),
        trust: None,
    }
}

pub fn config(state: &Path) -> EnvConfig {
    EnvConfig {
        state_dir: state.to_path_buf(),
        jails: jails(),
        interpreter: INTERPRETER.into(),
        version: "3.11".into(),
        build_uid: BUILD_UID,
        audit: None,
        egress: EgressProxy::new(
            prims_tests::prims_bin(),
            vec![],
            prims_tests::egress_account(),
        ),
    }
}

pub fn reqs(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

pub fn quiet(_: String) {}

pub fn leftovers(state: &Path) -> Vec<String> {
    std::fs::read_dir(state.join("envs"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect()
}

/// `size_bytes` from an environment's metadata file.
pub fn size_of(state: &Path, key: &str) -> u64 {
    let json = std::fs::read(state.join(format!("envs/{key}.json"))).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    v["size_bytes"].as_u64().unwrap()
}

/// Runs `code` in a run jail (no network, no package cache) on `venv`.
pub async fn run_in(venv: &Path, code: &str) -> RunResult {
    use prims_protocol::jail::LimitRequest;
    let ws = tempfile::tempdir().unwrap();
    std::os::unix::fs::chown(ws.path(), Some(RUN_UID), Some(RUN_UID)).unwrap();
    let mut limits = Policy::default().job_limits(&LimitRequest::default());
    limits.memory_bytes = 2 << 30;
    let spec = prims_tests::jail_spec::job_spec()
        .venv(venv)
        .workspace(ws.path())
        .code(code)
        .limits(limits)
        .cgroup(jails().cgroup("envs-test-run"))
        .host_id(RUN_UID)
        .build();
    let res = tokio::task::spawn_blocking(move || {
        jails()
            .run(&spec, &|_, _| {}, &Default::default(), None)
            .unwrap()
    })
    .await
    .unwrap();
    drop(ws);
    res
}
