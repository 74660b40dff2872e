//! `prims serve`: one command starts the supervisor and the front-end (as
//! the `prims` user, never nobody), prints the URL and a client config, and
//! Ctrl-C stops both.

mod support;

use prims_supervisor::accounts::{lookup, FRONTEND_USER};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{prims_bin, require_root};

const NOBODY: u32 = 65534;

/// `(real uid, argv[1])` of each child process of `parent`.
fn children(parent: u32) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    for ent in std::fs::read_dir("/proc").unwrap().flatten() {
        let path = ent.path();
        let Ok(status) = std::fs::read_to_string(path.join("status")) else {
            continue;
        };
        let field = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<u32>().ok())
        };
        if field("PPid:") != Some(parent) {
            continue;
        }
        let cmdline = std::fs::read(path.join("cmdline")).unwrap_or_default();
        let arg1 = cmdline
            .split(|b| *b == 0)
            .nth(1)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .unwrap_or_default();
        if let Some(uid) = field("Uid:") {
            out.push((uid, arg1));
        }
    }
    out
}

fn get_health(port: u16) -> String {
    use std::io::Write;
    let Ok(mut conn) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    let req = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    let mut out = String::new();
    if conn.write_all(req.as_bytes()).is_ok() {
        let _ = conn.read_to_string(&mut out);
    }
    out
}

/// Removes the test's cgroup parent (in every hierarchy), pass or fail.
struct CgroupCleanup(String);

impl Drop for CgroupCleanup {
    fn drop(&mut self) {
        for root in std::fs::read_dir("/sys/fs/cgroup")
            .into_iter()
            .flatten()
            .flatten()
        {
            let _ = std::fs::remove_dir(root.path().join(&self.0));
        }
    }
}

/// Detaches the session images under the test's directory, pass or fail,
/// so removing it can succeed.
struct MountCleanup(std::path::PathBuf);

impl Drop for MountCleanup {
    fn drop(&mut self) {
        prims_tests::teardown::unmount_below(&self.0);
    }
}

#[test]
fn serve_starts_both_and_stops_on_ctrl_c() {
    require_root();
    let dir = tempfile::Builder::new()
        .prefix("prims-serve-")
        .tempdir_in("/var/tmp")
        .unwrap();
    // Dropped before `dir`: sessions outlive serve, their images mounted.
    let _mounts = MountCleanup(dir.path().to_path_buf());
    let tag = format!("prims-serve-{}", std::process::id());
    let _cgroups = CgroupCleanup(tag.clone());
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "{}\n[python]\ndefault_packages = []\n{}[cgroup]\nparent = \"{tag}\"\n\
             [identity]\nuid_base = 690000\nuid_count = 1000\n",
            prims_tests::policy::TEST_DEFAULTS,
            prims_tests::harness::ipython_site_key()
        ),
    )
    .unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let state = dir.path().join("state");
    let out_path = dir.path().join("serve.out");
    let mut child = Command::new(prims_bin())
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--policy",
        ])
        .arg(&policy)
        .arg("--state-dir")
        .arg(&state)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // A file, not a pipe: children that outlived serve must not hang the test.
    let banner = || std::fs::read_to_string(&out_path).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(60);
    let health = loop {
        let got = get_health(port);
        if got.contains("\"supervisor\":true") && banner().contains("Ctrl-C") {
            break got;
        }
        assert!(
            Instant::now() < deadline,
            "prims serve did not become healthy"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "prims serve exited early"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(health.contains("base_env_ready"));
    // The front-end runs as the `prims` system user (created if it was
    // missing), the supervisor as root.
    let prims = lookup(FRONTEND_USER)
        .unwrap()
        .expect("prims serve created no prims user");
    let kids = children(child.id());
    assert!(
        kids.contains(&(prims.uid, "mcp".into())) && kids.contains(&(0, "supervisor".into())),
        "prims serve's children (uid, role): {kids:?}; prims is uid {}",
        prims.uid
    );
    assert!(prims.uid != NOBODY && prims.uid != 0);
    // SAFETY: SIGINT to the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(
            Instant::now() < deadline,
            "prims serve did not stop on SIGINT"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = banner();
    let marker = state.display().to_string();
    let survivors = prims_tests::host::processes_with_marker(&marker);
    assert!(
        survivors.is_empty(),
        "children outlived prims serve: {survivors:?}"
    );
    assert!(status.success(), "exit status {status}\n{out}");
    assert!(
        out.contains(&format!("http://127.0.0.1:{port}/mcp")),
        "{out}"
    );
    assert!(
        out.contains("mcp-remote") && out.contains("mcpServers"),
        "{out}"
    );
    assert!(
        !state.join("supervisor.sock").exists(),
        "the supervisor did not shut down"
    );
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the front-end still listens"
    );
}

#[test]
fn the_front_end_never_runs_as_nobody() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let mut as_user = Command::new(prims_bin());
    as_user.args(["mcp", "--listen", "127.0.0.1:0", "--user", "nobody"]);
    let mut serve = Command::new(prims_bin());
    serve
        .args(["serve", "--listen", "127.0.0.1:0", "--user", "nobody"])
        .arg("--state-dir")
        .arg(&state);
    // Started as nobody already, as a unit with `User=nobody` would (std
    // drops root's supplementary groups along with the uid).
    let mut as_nobody = Command::new(prims_bin());
    as_nobody
        .args(["mcp", "--listen", "127.0.0.1:0"])
        .uid(NOBODY)
        .gid(NOBODY);
    for (what, mut cmd) in [
        ("prims mcp --user nobody", as_user),
        ("prims serve --user nobody", serve),
        ("prims mcp as uid 65534", as_nobody),
    ] {
        let out = cmd.stdin(Stdio::null()).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{what}: {err}");
        assert!(
            err.contains("cannot run as nobody (uid 65534)"),
            "{what}: {err}"
        );
    }
    assert!(!state.exists(), "prims serve went on to create its state");
}
