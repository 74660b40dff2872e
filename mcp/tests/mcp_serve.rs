//! `prims serve`: one command starts the supervisor and the front-end,
//! prints the URL and a client config, and Ctrl-C stops both.

mod support;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{prims_bin, require_root};

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

#[test]
fn serve_starts_both_and_stops_on_ctrl_c() {
    require_root();
    let dir = tempfile::Builder::new()
        .prefix("prims-serve-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let tag = format!("prims-serve-{}", std::process::id());
    let _cgroups = CgroupCleanup(tag.clone());
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[python]\ndefault_packages = []\n[cgroup]\nparent = \"{tag}\"\n\
             [identity]\nuid_base = 690000\nuid_count = 1000\n"
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
