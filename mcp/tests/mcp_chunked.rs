//! Downloads without a Content-Length (`Transfer-Encoding: chunked`) through
//! `mount_file` and `run_code`'s `files[]`, against a real front-end and
//! supervisor: streamed through to the session's disk, so neither process
//! holds a body in memory, and cut off at `egress.max_download` without
//! leaving a file or a temporary behind.

mod support;

use serde_json::{json, Value};
use support::client::{call, connect, err, ok, run, Mcp};
use support::stream_server::{Pattern, StreamServer};
use support::{peak_rss, Stack};

const MIB: u64 = 1024 * 1024;

fn policy(max_download: &str) -> String {
    format!(
        "[egress]\nallow = [\"127.0.0.1/32\"]\nmax_download = \"{max_download}\"\n\
         timeout = \"10m\"\n[limits]\nwall_time = \"2m\"\ncpu_time = \"2m\"\n\
         [sessions]\ndisk_quota = \"768MiB\"\n"
    )
}

async fn mount(c: &Mcp, url: &str, path: &str, session: Option<&str>) -> Value {
    let mut args = json!({"url": url, "mount_path": path});
    if let Some(s) = session {
        args["session_id"] = s.into();
    }
    ok(&call(c, "mount_file", args).await)
}

/// A tool error's message without the session note that follows it.
fn first_line(message: &str) -> String {
    message.lines().next().unwrap_or_default().to_owned()
}

/// Every name in the session's `mounts/` as the host sees it, hidden
/// temporaries included.
fn mounts_on_disk(stack: &Stack, session: &str) -> Vec<String> {
    let dir = stack.workspace(session).join("mounts");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// sha256 and size of `mounts/<name>` as the jailed code reads it.
async fn checksum_in_jail(c: &Mcp, session: &str, name: &str) -> (String, u64) {
    let code = format!(
        "import hashlib\nh = hashlib.sha256()\nn = 0\n\
         with open('mounts/{name}', 'rb') as f:\n\
         \x20   for b in iter(lambda: f.read(1 << 20), b''):\n\
         \x20       h.update(b)\n\
         \x20       n += len(b)\n\
         print(h.hexdigest(), n)"
    );
    let r = run(c, &code, Some(session)).await;
    let out = r["stdout"].as_str().expect("stdout").trim().to_owned();
    let (sum, n) = out.split_once(' ').expect("sha and size");
    (sum.to_owned(), n.parse().expect("size"))
}

#[tokio::test(flavor = "multi_thread")]
async fn two_concurrent_250_mib_chunked_downloads_keep_both_processes_flat() {
    const SIZE: u64 = 250 * MIB;
    let stack = Stack::start(&policy("256MiB"), None);
    let server = StreamServer::start().await;
    let c = connect(&stack.url(), None).await;

    // Warm-up: the HTTP client, the supervisor connections, a session, a
    // jail and a chunked upload all exist before the baseline is taken.
    let warm = mount(&c, &server.url("/chunked/3000000"), "warm.bin", None).await;
    let session = warm["session_id"].as_str().expect("session").to_owned();
    let pattern = Pattern::new();
    assert_eq!(
        checksum_in_jail(&c, &session, "warm.bin").await,
        (pattern.sha256(3_000_000), 3_000_000)
    );
    let (front, sup) = (stack.frontend_pid(), stack.supervisor_pid());
    let (front_before, sup_before) = (peak_rss(front), peak_rss(sup));

    let big = server.url(&format!("/chunked/{SIZE}"));
    let (a, b) = tokio::join!(
        mount(&c, &big, "a.bin", Some(&session)),
        mount(&c, &big, "sub/b.bin", Some(&session)),
    );
    let (front_after, sup_after) = (peak_rss(front), peak_rss(sup));
    println!(
        "front-end VmHWM {} -> {} MiB, supervisor VmHWM {} -> {} MiB",
        front_before / MIB,
        front_after / MIB,
        sup_before / MIB,
        sup_after / MIB
    );
    assert_eq!(a["bytes"], SIZE);
    assert_eq!(b["bytes"], SIZE);
    assert_eq!(b["mounted_as"], "mounts/sub/b.bin");
    assert!(
        front_after - front_before < 64 * MIB,
        "two chunked downloads raised the front-end's peak memory by {} MiB",
        (front_after - front_before) / MIB
    );
    assert!(
        sup_after - sup_before < 64 * MIB,
        "two chunked uploads raised the supervisor's peak memory by {} MiB",
        (sup_after - sup_before) / MIB
    );

    // Both arrived whole: sizes from list_dir, contents from the jail.
    let listed = ok(&call(
        &c,
        "list_dir",
        json!({"dir_path": "mounts", "session_id": session}),
    )
    .await);
    let sizes: Vec<(String, u64)> = listed["result"]
        .as_array()
        .expect("entries")
        .iter()
        .filter(|e| e["type"] == "file")
        .map(|e| {
            let name = e["name"].as_str().expect("name").to_owned();
            (name, e["size"].as_u64().expect("size"))
        })
        .collect();
    assert_eq!(
        sizes,
        [
            ("a.bin".to_owned(), SIZE),
            ("warm.bin".to_owned(), 3_000_000)
        ]
    );
    let want = pattern.sha256(SIZE);
    for name in ["a.bin", "sub/b.bin"] {
        assert_eq!(
            checksum_in_jail(&c, &session, name).await,
            (want.clone(), SIZE),
            "{name}"
        );
    }
    assert_eq!(
        mounts_on_disk(&stack, &session),
        ["a.bin", "sub", "warm.bin"]
    );
    assert_eq!(server.gets(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_chunked_body_past_max_download_is_cut_off_and_leaves_nothing() {
    let stack = Stack::start(&policy("1MiB"), None);
    let server = StreamServer::start().await;
    let c = connect(&stack.url(), None).await;
    let first = mount(&c, &server.url("/chunked/1000"), "kept.bin", None).await;
    let session = first["session_id"].as_str().expect("session").to_owned();

    let args = |path: &str| json!({"url": server.url(path), "mount_path": "big.bin", "session_id": session});
    let refused = |r| first_line(&err(&r));
    let chunked = refused(call(&c, "mount_file", args("/chunked/3145728")).await);
    let sized = refused(call(&c, "mount_file", args("/sized/3145728")).await);
    let limit = "failed: the transfer exceeds the size limit of 1048576 bytes";
    assert!(chunked.ends_with(limit), "{chunked}");
    assert!(sized.ends_with(limit), "{sized}");
    assert_eq!(
        chunked.replace("/chunked/", "/sized/"),
        sized,
        "the same error with and without a Content-Length"
    );
    // Exactly the limit is still fine.
    let at_limit = json!({
        "url": server.url("/chunked/1048576"), "mount_path": "limit.bin", "session_id": session,
    });
    assert_eq!(
        ok(&call(&c, "mount_file", at_limit).await)["bytes"],
        1048576
    );

    // No file and no temporary: the tool answered only after the
    // supervisor had discarded the upload.
    assert_eq!(mounts_on_disk(&stack, &session), ["kept.bin", "limit.bin"]);
    let listed = ok(&call(
        &c,
        "list_dir",
        json!({"dir_path": "mounts", "session_id": session}),
    )
    .await);
    let names: Vec<&str> = listed["result"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["kept.bin", "limit.bin"]);
    // Nothing was remembered either: the same url is fetched, and cut, again.
    let again = refused(call(&c, "mount_file", args("/chunked/3145728")).await);
    assert!(again.ends_with(limit), "{again}");
    assert_eq!(server.gets(), 5);

    // The same through run_code's files[]: the run does not start.
    let r = call(
        &c,
        "run_code",
        json!({
            "code": "print('ran')",
            "files": [{"url": server.url("/chunked/3145728"), "mountPath": "f.bin"}],
            "session_id": session,
        }),
    )
    .await;
    assert!(refused(r).ends_with(limit));
    assert_eq!(mounts_on_disk(&stack, &session), ["kept.bin", "limit.bin"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn small_chunked_and_sized_downloads_arrive_byte_exact() {
    let stack = Stack::start(&policy("1MiB"), None);
    let server = StreamServer::start().await;
    let c = connect(&stack.url(), None).await;
    let pattern = Pattern::new();
    let small = mount(&c, &server.url("/chunked/100"), "small.bin", None).await;
    let session = small["session_id"].as_str().expect("session").to_owned();
    assert_eq!(small["bytes"], 100);
    assert_eq!(small["cached"], false);
    let empty = mount(&c, &server.url("/chunked/0"), "empty.bin", Some(&session)).await;
    assert_eq!(empty["bytes"], 0);
    let sized = mount(
        &c,
        &server.url("/sized/200000"),
        "sized.bin",
        Some(&session),
    )
    .await;
    assert_eq!(sized["bytes"], 200000);
    let again = mount(&c, &server.url("/chunked/100"), "small.bin", Some(&session)).await;
    assert_eq!(again["cached"], true);
    assert_eq!(server.gets(), 3, "a cached chunked mount was fetched again");

    for (name, n) in [("small.bin", 100), ("empty.bin", 0), ("sized.bin", 200000)] {
        assert_eq!(
            checksum_in_jail(&c, &session, name).await,
            (pattern.sha256(n), n),
            "{name}"
        );
    }
    let preview = ok(&call(
        &c,
        "preview_file",
        json!({"relative_path": "mounts/small.bin", "session_id": session}),
    )
    .await);
    assert_eq!(preview["size"], 100);

    // files[] takes the same path before the run.
    let r = ok(&call(
        &c,
        "run_code",
        json!({
            "code": "import os\nprint(os.path.getsize('mounts/in/f.bin'))",
            "files": [{"url": server.url("/chunked/70000"), "mountPath": "in/f.bin"}],
            "session_id": session,
        }),
    )
    .await);
    assert_eq!(r["stdout"], "70000\n");
    assert_eq!(
        mounts_on_disk(&stack, &session),
        ["empty.bin", "in", "sized.bin", "small.bin"]
    );
}
