//! mount_file, run_code's files[] and persist_artifact against a real
//! loopback HTTP server (allowed by `[egress] allow`), and the SSRF guard
//! when loopback is not allowed.

mod support;

use serde_json::json;
use std::collections::HashMap;
use support::client::{call, connect, err, ok, run};
use support::http_server::FileServer;
use support::Stack;

const ALLOW_LOOPBACK: &str = "[egress]\nallow = [\"127.0.0.1/32\"]\n";

#[tokio::test(flavor = "multi_thread")]
async fn mount_file_downloads_once_per_session() {
    let stack = Stack::start(ALLOW_LOOPBACK, None);
    let csv = b"a,b\n1,2\n3,4\n".to_vec();
    let files = HashMap::from([("/data.csv".to_owned(), csv.clone())]);
    let server = FileServer::start(files, 200).await;
    let c = connect(&stack.url(), None).await;
    let url = server.url("/data.csv");
    let first = ok(&call(
        &c,
        "mount_file",
        json!({"url": url, "mount_path": "my_data.csv"}),
    )
    .await);
    assert_eq!(first["mounted_as"], "mounts/my_data.csv");
    assert_eq!(first["bytes"], csv.len());
    assert_eq!(first["cached"], false);
    let again = ok(&call(
        &c,
        "mount_file",
        json!({"url": url, "mount_path": "my_data.csv"}),
    )
    .await);
    assert_eq!(again["cached"], true);
    assert_eq!(
        server.count("GET"),
        1,
        "the second mount_file downloaded again"
    );
    let code = "import csv\nrows = list(csv.reader(open('mounts/my_data.csv')))\nprint(len(rows))\n\
                try:\n    open('mounts/my_data.csv', 'a').write('x')\nexcept OSError as e:\n    print('read-only')";
    let r = run(&c, code, None).await;
    assert_eq!(r["stdout"], "3\nread-only\n");
    // Another session downloads its own copy.
    let d = connect(&stack.url(), None).await;
    ok(&call(
        &d,
        "mount_file",
        json!({"url": url, "mount_path": "my_data.csv"}),
    )
    .await);
    assert_eq!(server.count("GET"), 2);
    let missing = call(
        &c,
        "mount_file",
        json!({"url": server.url("/nope"), "mount_path": "x"}),
    )
    .await;
    assert!(err(&missing).contains("404"));
}

#[tokio::test(flavor = "multi_thread")]
async fn files_are_mounted_before_the_run() {
    let stack = Stack::start(ALLOW_LOOPBACK, None);
    let files = HashMap::from([("/in.txt".to_owned(), b"hello from http".to_vec())]);
    let server = FileServer::start(files, 200).await;
    let c = connect(&stack.url(), None).await;
    let args = json!({
        "code": "print(open('mounts/sub/in.txt').read())",
        "files": [{"url": server.url("/in.txt"), "mountPath": "sub/in.txt"}],
    });
    let r = ok(&call(&c, "run_code", args.clone()).await);
    assert_eq!(r["stdout"], "hello from http\n");
    ok(&call(&c, "run_code", args).await);
    assert_eq!(
        server.count("GET"),
        1,
        "files[] downloaded the same url twice"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn persist_artifact_puts_the_whole_file_with_a_content_length() {
    let stack = Stack::start(ALLOW_LOOPBACK, None);
    let server = FileServer::start(HashMap::new(), 200).await;
    let c = connect(&stack.url(), None).await;
    run(
        &c,
        "open('output/report.csv','wb').write(bytes(range(256)) * 40)",
        None,
    )
    .await;
    let r = ok(&call(
        &c,
        "persist_artifact",
        json!({
            "relative_path": "report.csv",
            "presigned_url": server.url("/bucket/report.csv?X-Amz-Signature=abc"),
        }),
    )
    .await);
    assert_eq!(r["uploaded_bytes"], 10240);
    assert_eq!(r["status"], 200);
    let reqs = server.requests.lock().unwrap().clone();
    assert_eq!(reqs.len(), 1);
    let put = &reqs[0];
    assert_eq!(put.method, "PUT");
    assert_eq!(put.path, "/bucket/report.csv?X-Amz-Signature=abc");
    assert_eq!(put.header("content-length"), Some("10240"));
    assert!(put.header("transfer-encoding").is_none(), "chunked upload");
    let want: Vec<u8> = (0..40).flat_map(|_| 0..=255u8).collect();
    assert_eq!(put.body, want);

    // The artifact's relative_path as run_code listed it names the same file.
    let listed = ok(&call(
        &c,
        "persist_artifact",
        json!({
        "relative_path": "output/report.csv", "presigned_url": server.url("/again")}),
    )
    .await);
    assert_eq!(listed["uploaded_bytes"], 10240);

    let refusing = FileServer::start(HashMap::new(), 403).await;
    let r = call(
        &c,
        "persist_artifact",
        json!({
        "relative_path": "report.csv", "presigned_url": refusing.url("/x")}),
    )
    .await;
    assert!(err(&r).contains("Upload failed with HTTP 403"));
    let r = call(
        &c,
        "persist_artifact",
        json!({
        "relative_path": "nothing.csv", "presigned_url": server.url("/x")}),
    )
    .await;
    err(&r);
}

#[tokio::test(flavor = "multi_thread")]
async fn loopback_is_refused_unless_allowed() {
    let stack = Stack::start("", None);
    let server = FileServer::start(HashMap::from([("/x".to_owned(), b"x".to_vec())]), 200).await;
    let c = connect(&stack.url(), None).await;
    let r = call(
        &c,
        "mount_file",
        json!({"url": server.url("/x"), "mount_path": "x"}),
    )
    .await;
    let e = err(&r);
    assert!(e.contains("Downloading"), "{e}");
    let r = call(
        &c,
        "mount_file",
        json!({"url": "file:///etc/passwd", "mount_path": "x"}),
    )
    .await;
    assert!(err(&r).contains("http"));
    assert_eq!(server.count("GET"), 0);
}
