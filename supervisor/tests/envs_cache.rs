//! The environment cache against real uv, a real install jail and the real
//! package index. Needs root and `cargo build --workspace` (for the jailer).

mod envs_support;

use envs_support::*;
use prims_policy::Policy;
use prims_protocol::jail::Status;
use prims_protocol::wire::ErrorCode;
use prims_supervisor::envs::{EnvError, Envs};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn six_builds_once_then_is_cached() {
    // Not seeded: this test also installs uv through Envs.
    let f = fixture(&policy("default_packages = []"), false);
    let seen = Mutex::new(Vec::new());
    let progress = |m: String| seen.lock().unwrap().push(m);
    let t = Instant::now();
    let lease = f.envs.ensure(&reqs(&["Six"]), &progress).await.unwrap();
    let cold = t.elapsed();
    assert!(lease.built);
    assert!(lease
        .dir
        .join("lib/python3.11/site-packages/six.py")
        .is_file());
    assert!(f.state.path().join("tools/bin/uv").is_file());
    assert_eq!(f.envs.stats().builds, 1);
    assert!(!seen.lock().unwrap().is_empty(), "no progress was reported");
    assert!(f.envs.stats().bytes > 0);

    let t = Instant::now();
    let again = f.envs.ensure(&reqs(&["six"]), &quiet).await.unwrap();
    let warm = t.elapsed();
    assert!(!again.built);
    assert_eq!(again.dir, lease.dir);
    assert_eq!(f.envs.stats().builds, 1, "a cached ensure must not build");
    eprintln!("six: cold build (uv install included) {cold:?}, cached ensure {warm:?}");

    // A restarted server finds it on disk.
    drop((lease, again));
    let reopened = Envs::new(config(f.state.path()), &policy("default_packages = []")).unwrap();
    let l = reopened.ensure(&reqs(&["six"]), &quiet).await.unwrap();
    assert!(!l.built);
    assert_eq!(reopened.stats().builds, 0);
    assert_eq!(reopened.stats().envs, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_ensures_share_one_build() {
    let f = fixture(&policy("default_packages = []"), true);
    let r = reqs(&["six"]);
    let t = Instant::now();
    let (a, b) = tokio::join!(f.envs.ensure(&r, &quiet), f.envs.ensure(&r, &quiet));
    let (a, b) = (a.unwrap(), b.unwrap());
    eprintln!("six: cold build with a seeded uv {:?}", t.elapsed());
    assert_eq!(a.dir, b.dir);
    assert!(a.built ^ b.built, "exactly one of the calls built it");
    assert_eq!(f.envs.stats().builds, 1);
    assert_eq!(f.envs.stats().envs, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_package_fails_with_uvs_explanation() {
    let f = fixture(&policy("default_packages = []"), true);
    let err = f
        .envs
        .ensure(&reqs(&["this-package-does-not-exist-prims-xyz"]), &quiet)
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with("pip install failed: "), "{msg}");
    assert!(
        msg.contains("not found in the package registry") || msg.contains("No solution found"),
        "{msg}"
    );
    assert!(!msg.contains('\u{1b}'), "ANSI codes in {msg:?}");
    assert!(msg.len() < 4200, "{} bytes", msg.len());
    assert_eq!(err.code(), ErrorCode::Environment);
    assert_eq!(f.envs.stats().envs, 0);
    assert_eq!(f.envs.stats().builds, 1);
    assert!(leftovers(f.state.path()).is_empty());
}

#[tokio::test]
async fn junk_requirements_are_refused_before_uv_runs() {
    let f = fixture(&policy("default_packages = []"), false);
    for junk in [
        "--index-url=http://evil",
        "-r /etc/passwd",
        "six; rm -rf /",
        "../x",
        "git+https://x",
        "",
        "pkg @ file:///etc",
        "/etc/passwd",
    ] {
        let err = f.envs.ensure(&reqs(&[junk]), &quiet).await.unwrap_err();
        assert!(
            matches!(err, EnvError::BadRequirement { .. }),
            "{junk:?}: {err}"
        );
        assert_eq!(err.code(), ErrorCode::BadRequest);
    }
    let many: Vec<String> = (0..51).map(|i| format!("p{i}")).collect();
    let err = f.envs.ensure(&many, &quiet).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::BadRequest);
    assert_eq!(f.envs.stats().builds, 0);
    assert!(!f.state.path().join("tools").exists(), "uv was installed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn base_env_imports_pandas_in_a_run_jail() {
    // The default packages, without the IPython layer built beside them.
    let f = fixture(&policy("ipython_packages = []"), true);
    assert!(!f.envs.base_ready());
    let t = Instant::now();
    f.envs.spawn_base_build();
    // Joins the build just started (one flight per key) and fails with its
    // error, rather than waiting for a readiness that never comes.
    let first = f
        .envs
        .ensure(&[], &quiet)
        .await
        .unwrap_or_else(|e| panic!("building the base environment: {e}"));
    assert!(f.envs.base_ready());
    eprintln!(
        "base env (pandas, openpyxl, requests) built in {:?}",
        t.elapsed()
    );
    drop(first);
    let lease = f.envs.ensure(&[], &quiet).await.unwrap();
    assert!(!lease.built);
    assert_eq!(f.envs.stats().builds, 1);

    let t = Instant::now();
    let res = run_in(
        &lease.dir,
        "import pandas, openpyxl, requests; print(pandas.__version__)",
    )
    .await;
    let out = String::from_utf8_lossy(&res.stdout);
    let err = String::from_utf8_lossy(&res.stderr);
    eprintln!(
        "import pandas, openpyxl, requests in a run jail: {:?}",
        t.elapsed()
    );
    assert_eq!(res.outcome.status, Status::Ok, "{:?}\n{err}", res.outcome);
    let v = out.trim();
    assert!(
        v.split('.').count() >= 2 && v.starts_with(|c: char| c.is_ascii_digit()),
        "{out:?} {err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_removes_least_recently_used_and_never_a_leased_env() {
    let f = fixture(&policy("default_packages = []"), true);
    // The base environment (no packages here: an empty venv, no uv run) is
    // the least recently used of all, and still never collected.
    let base = f.envs.ensure(&[], &quiet).await.unwrap();
    assert!(base.built && f.envs.base_ready());
    let base = base.key.clone();
    let mut keys = Vec::new();
    for p in ["six", "idna", "packaging"] {
        tokio::time::sleep(Duration::from_millis(5)).await;
        let l = f.envs.ensure(&reqs(&[p]), &quiet).await.unwrap();
        keys.push(l.key.clone());
    }
    let [six, idna, packaging] = [&keys[0], &keys[1], &keys[2]];
    // Use six again: idna is now the least recently used but for the base.
    tokio::time::sleep(Duration::from_millis(5)).await;
    drop(f.envs.ensure(&reqs(&["six"]), &quiet).await.unwrap());
    assert_eq!(f.envs.stats().envs, 4);
    let s = f.state.path();
    let cap = size_of(s, &base) + size_of(s, six) + size_of(s, packaging);
    let capped = |cap: &str| policy(&format!("default_packages = []\nenv_cache_bytes = {cap}"));
    f.envs.update_policy(&capped(&cap.to_string()));
    assert_eq!(f.envs.stats().envs, 3);
    assert!(!s.join("envs").join(idna).exists());
    assert!(!s.join(format!("envs/{idna}.json")).exists());
    assert!(s.join("envs").join(six).is_dir());
    assert!(f.envs.gc().unwrap().is_empty(), "already under the cap");

    // With a lease on six and no room at all, only packaging may go.
    let held = f.envs.ensure(&reqs(&["six"]), &quiet).await.unwrap();
    f.envs.update_policy(&capped("\"0B\""));
    assert_eq!(f.envs.stats().envs, 2);
    let six_py = held.dir.join("lib/python3.11/site-packages/six.py");
    assert!(six_py.is_file());
    assert!(!s.join("envs").join(packaging).exists());
    drop(held);
    assert_eq!(f.envs.gc().unwrap(), vec![six.clone()]);
    assert_eq!(f.envs.stats().envs, 1);
    assert!(f.envs.base_ready() && s.join("envs").join(&base).is_dir());
    assert!(leftovers(s).is_empty());
    assert_eq!(f.envs.stats().builds, 4);
}

#[test]
fn crash_leftovers_are_removed_at_start() {
    require_root();
    let state = tempfile::tempdir().unwrap();
    let envs = state.path().join("envs");
    let key = "a".repeat(64);
    let orphan = "b".repeat(64);
    for d in [
        format!(".build-{key}-0123456789abcdef/venv/lib"),
        format!(".trash-{key}-0123456789abcdef/bin"),
        orphan.clone(),
    ] {
        std::fs::create_dir_all(envs.join(d)).unwrap();
    }
    std::fs::write(envs.join(format!("{key}.json")), "{}").unwrap();
    let e = Envs::new(config(state.path()), &Policy::default()).unwrap();
    assert_eq!(e.stats().envs, 0);
    let left: Vec<_> = std::fs::read_dir(&envs).unwrap().flatten().collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn build_policy_keys_are_validated() {
    let p = policy("build_timeout = \"90s\"\nbuild_memory = \"1GiB\"");
    assert_eq!(p.python.build_timeout.0, Duration::from_secs(90));
    assert!(Policy::from_toml_str("[python]\nbuild_timeout = \"0s\"\n").is_err());
    assert!(Policy::from_toml_str("[python]\nbuild_memory = \"1MiB\"\n").is_err());
}
