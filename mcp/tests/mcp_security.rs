//! Isolation between sessions and tenants, path attacks through every tool
//! and `/artifacts`, Origin and bearer-token checks, DELETE clean-up.

mod support;

use prims_protocol::client::ClientError;
use prims_protocol::wire::ErrorCode;
use reqwest::StatusCode;
use serde_json::{json, Value};
use support::client::{call, connect, err, ok, run};
use support::Stack;

/// GET /artifacts/<path> with the path sent verbatim (no client-side
/// normalization of `..` or `%2e%2e`).
async fn artifact(stack: &Stack, path: &str, headers: &[(&str, &str)]) -> (StatusCode, Vec<u8>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut conn = tokio::net::TcpStream::connect(("127.0.0.1", stack.port))
        .await
        .unwrap();
    let mut req =
        format!("GET /artifacts/{path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    conn.write_all(req.as_bytes()).await.unwrap();
    let mut resp = Vec::new();
    conn.read_to_end(&mut resp).await.unwrap();
    let text = String::from_utf8_lossy(&resp).into_owned();
    let code: u16 = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("status line");
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.as_bytes().to_vec())
        .unwrap_or_default();
    (StatusCode::from_u16(code).unwrap(), body)
}

#[tokio::test(flavor = "multi_thread")]
async fn two_sessions_cannot_see_each_other() {
    let stack = Stack::start("", None);
    let c = connect(&stack.url(), None).await;
    let a = run(&c, "open('output/secret.txt','w').write('alpha')", None).await["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let d = connect(&stack.url(), None).await;
    let b = run(&d, "print(1)", None).await["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(a, b);
    let listing = ok(&call(&d, "list_dir", json!({"dir_path": "output"})).await);
    assert_eq!(listing["result"], json!([]));
    assert!(!err(&call(
        &d,
        "preview_file",
        json!({"relative_path": "output/secret.txt"})
    )
    .await)
    .is_empty());
    let peek = run(&d, "import os; print(os.path.exists('/workspace/../sessions'), os.listdir('/workspace/output'))", None).await;
    assert_eq!(peek["stdout"], "False []\n");
    // /artifacts by workspace id and by MCP session.
    assert_eq!(
        artifact(&stack, "secret.txt", &[("prims-session-id", &b)])
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    let (st, body) = artifact(&stack, "secret.txt", &[("prims-session-id", &a)]).await;
    assert_eq!(st, StatusCode::OK);
    assert!(body.ends_with(b"alpha"), "{body:?}");
    // An artifact's relative_path works too: /artifacts/output/secret.txt.
    let (st, body) = artifact(&stack, "output/secret.txt", &[("prims-session-id", &a)]).await;
    assert_eq!(st, StatusCode::OK);
    assert!(body.ends_with(b"alpha"), "{body:?}");
    // Range requests.
    let resp = reqwest::Client::new()
        .get(format!("{}/artifacts/secret.txt", stack.base()))
        .header("prims-session-id", &a)
        .header("range", "bytes=1-3")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::PARTIAL_CONTENT);
    assert_eq!(resp.headers()["content-range"], "bytes 1-3/5");
    assert_eq!(resp.headers()["content-type"], "text/plain");
    assert_eq!(resp.bytes().await.unwrap().as_ref(), b"lph");
    assert_eq!(
        artifact(&stack, "secret.txt", &[]).await.0,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        artifact(&stack, "secret.txt", &[("mcp-session-id", "no-such")])
            .await
            .0,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn path_traversal_and_planted_symlinks_are_refused_everywhere() {
    let stack = Stack::start("[egress]\nallow = [\"127.0.0.1/32\"]\n", None);
    let c = connect(&stack.url(), None).await;
    let plant =
        "import os\nos.symlink('/etc/passwd', 'output/pw')\nos.symlink('/etc', 'output/etc')\n\
                 os.symlink('../../../../../../etc/passwd', 'output/up')\nprint('planted')";
    let sid = run(&c, plant, None).await["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    for dir in ["..", "../..", "/etc", "output/etc", "output/../../"] {
        let r = call(&c, "list_dir", json!({ "dir_path": dir })).await;
        assert!(!err(&r).contains("root:"), "list_dir {dir}");
    }
    for path in [
        "/etc/passwd",
        "../../etc/passwd",
        "output/pw",
        "output/up",
        "output/etc/passwd",
    ] {
        let r = call(&c, "preview_file", json!({ "relative_path": path })).await;
        let e = err(&r);
        assert!(!e.contains("root:x:0:0"), "preview_file {path} leaked: {e}");
    }
    for path in ["../x", "/tmp/x", "a/../../x"] {
        let m = call(
            &c,
            "mount_file",
            json!({ "url": "http://127.0.0.1:9/x", "mount_path": path }),
        )
        .await;
        assert!(err(&m).contains("mount_path"), "mount_file {path}");
        let f = call(&c, "run_code", json!({ "code": "print(1)", "files": [{"url": "http://127.0.0.1:9/x", "mountPath": path}] })).await;
        assert!(err(&f).contains("mount_path"), "files[] {path}");
    }
    for path in ["../mounts/x", "/etc/passwd", "pw", "up", "etc/passwd"] {
        let r = call(
            &c,
            "persist_artifact",
            json!({ "relative_path": path, "presigned_url": "http://127.0.0.1:9/put" }),
        )
        .await;
        assert!(!err(&r).is_empty(), "persist_artifact {path}");
    }
    let h = [("prims-session-id", sid.as_str())];
    for (path, want) in [
        ("pw", StatusCode::FORBIDDEN),
        ("up", StatusCode::FORBIDDEN),
        ("etc/passwd", StatusCode::FORBIDDEN),
        ("%2e%2e/%2e%2e/etc/passwd", StatusCode::FORBIDDEN),
        ("..%2fmounts", StatusCode::FORBIDDEN),
        ("%2fetc%2fpasswd", StatusCode::FORBIDDEN),
        ("../../etc/passwd", StatusCode::FORBIDDEN),
        ("missing.txt", StatusCode::NOT_FOUND),
    ] {
        let (st, body) = artifact(&stack, path, &h).await;
        assert_eq!(st, want, "/artifacts/{path}");
        assert!(
            !String::from_utf8_lossy(&body).contains("root:"),
            "/artifacts/{path}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_foreign_origin_gets_403() {
    let stack = Stack::start("", None);
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let post = |origin: &'static str| {
        reqwest::Client::new()
            .post(stack.url())
            .header("origin", origin)
            .header("accept", "application/json, text/event-stream")
            .json(&init)
            .send()
    };
    assert_eq!(
        post("http://evil.example").await.unwrap().status(),
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        post("http://localhost:6274").await.unwrap().status(),
        StatusCode::OK
    );
    let health = reqwest::Client::new()
        .get(format!("{}/health", stack.base()))
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), StatusCode::FORBIDDEN);
    let host = reqwest::Client::new()
        .get(format!("{}/health", stack.base()))
        .header("host", "rebind.example")
        .send()
        .await
        .unwrap();
    assert_eq!(host.status(), StatusCode::FORBIDDEN);
}

const TOKENS: &str = "[[tokens]]\ntoken = \"token-of-tenant-a-0123\"\ntenant = \"a\"\n\
                      [[tokens]]\ntoken = \"token-of-tenant-b-4567\"\ntenant = \"b\"\n";

#[tokio::test(flavor = "multi_thread")]
async fn tokens_authenticate_and_tenants_stay_apart() {
    let stack = Stack::start("", Some(TOKENS));
    let raw = reqwest::Client::new()
        .post(stack.url())
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status(), StatusCode::UNAUTHORIZED);
    assert!(raw.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .starts_with("Bearer"));
    let bad = reqwest::Client::new()
        .get(format!("{}/artifacts/x", stack.base()))
        .bearer_auth("wrong-token-000000000")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), StatusCode::UNAUTHORIZED);

    let a = connect(&stack.url(), Some("token-of-tenant-a-0123")).await;
    let b = connect(&stack.url(), Some("token-of-tenant-b-4567")).await;
    let sa = run(&a, "open('output/a.txt','w').write('A')", None).await["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let stolen = call(
        &b,
        "list_dir",
        json!({"dir_path": "output", "session_id": sa}),
    )
    .await;
    assert!(
        err(&stolen).contains("does not exist"),
        "tenant b used tenant a's session"
    );
    let stolen_run = call(
        &b,
        "run_code",
        json!({"code": "print(open('output/a.txt').read())", "session_id": sa}),
    )
    .await;
    err(&stolen_run);
    let mine = ok(&call(
        &a,
        "list_dir",
        json!({"dir_path": "output", "session_id": sa}),
    )
    .await);
    assert_eq!(mine["result"][0]["name"], "a.txt");
    let http = |token: &'static str| {
        reqwest::Client::new()
            .get(format!("{}/artifacts/a.txt", stack.base()))
            .bearer_auth(token)
            .header("prims-session-id", sa.clone())
            .send()
    };
    assert_eq!(
        http("token-of-tenant-b-4567").await.unwrap().status(),
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        http("token-of-tenant-a-0123").await.unwrap().status(),
        StatusCode::OK
    );
    // The supervisor recorded the tenant, and checks it on every request
    // itself: asked for another tenant, or for none, the session does not exist.
    let sup = stack.supervisor().await;
    let info = |tenant: Option<&'static str>| sup.session_info(&sa, tenant);
    let own = info(Some("a")).await.unwrap();
    assert_eq!(own.tenant.as_deref(), Some("a"), "{own:?}");
    for other in [Some("b"), None] {
        match info(other).await {
            Err(ClientError::Server(e)) => assert_eq!(e.code, ErrorCode::NotFound, "{other:?}"),
            r => panic!("tenant {other:?} reached tenant a's session: {r:?}"),
        }
    }
}

/// The JSON-RPC result in an SSE (or JSON) response body.
fn rpc_result(body: &str) -> Value {
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .chain(std::iter::once(body))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("result").is_some())
        .unwrap_or_else(|| panic!("no result in {body}"))["result"]
        .clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn deleting_a_legacy_session_closes_its_workspace() {
    let stack = Stack::start("", None);
    let http = reqwest::Client::new();
    let post = |sid: Option<&str>, body: Value| {
        let mut r = http
            .post(stack.url())
            .header("accept", "application/json, text/event-stream")
            .json(&body);
        if let Some(s) = sid {
            r = r
                .header("mcp-session-id", s)
                .header("mcp-protocol-version", "2025-06-18");
        }
        r.send()
    };
    let init = post(None, json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}))
        .await
        .unwrap();
    let mcp = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    post(
        Some(&mcp),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await
    .unwrap();
    let listed = post(
        Some(&mcp),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "list_dir", "arguments": {}}}),
    )
    .await
    .unwrap()
    .text()
    .await
    .unwrap();
    let sid = rpc_result(&listed)["structuredContent"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let sup = stack.supervisor().await;
    sup.session_info(&sid, None).await.expect("session exists");
    let del = http
        .delete(stack.url())
        .header("mcp-session-id", &mcp)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .unwrap();
    assert!(
        del.status().is_success(),
        "DELETE answered {}",
        del.status()
    );
    match sup.session_info(&sid, None).await {
        Err(ClientError::Server(e)) => assert_eq!(e.code, ErrorCode::NotFound),
        other => panic!("the workspace survived the DELETE: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn health_and_metrics() {
    let stack = Stack::start("", None);
    let c = connect(&stack.url(), None).await;
    run(&c, "print(1)", None).await;
    let health: Value = reqwest::get(format!("{}/health", stack.base()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["supervisor"], true);
    assert_eq!(health["base_env_ready"], true);
    let metrics = reqwest::get(format!("{}/metrics", stack.base()))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for needle in [
        "prims_runs_total{status=\"ok\"} 1",
        "prims_run_duration_seconds_count 1",
        "prims_sessions_active 1",
        "prims_environment_builds_total",
    ] {
        assert!(
            metrics.contains(needle),
            "{needle} missing from:\n{metrics}"
        );
    }
}

/// With tokens configured, `/metrics` takes the same bearer token as
/// `/mcp` (any configured one), with the same 401 and `WWW-Authenticate`;
/// the health checks stay open for probes and routers that carry none.
#[tokio::test(flavor = "multi_thread")]
async fn metrics_need_a_token_when_tokens_are_configured() {
    let stack = Stack::start("", Some(TOKENS));
    let http = reqwest::Client::new();
    let get = |path: &str, token: Option<&str>| {
        let mut r = http.get(format!("{}{path}", stack.base()));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        r.send()
    };
    let mcp = |token: Option<&str>| {
        let mut r = http
            .post(stack.url())
            .header("accept", "application/json, text/event-stream")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        r.send()
    };
    for token in [None, Some("wrong-token-000000000")] {
        let m = get("/metrics", token).await.unwrap();
        let want = mcp(token).await.unwrap();
        assert_eq!(want.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(
            m.status(),
            StatusCode::UNAUTHORIZED,
            "/metrics with {token:?}"
        );
        assert_eq!(
            m.headers().get("www-authenticate"),
            want.headers().get("www-authenticate"),
            "/metrics with {token:?}"
        );
        let body = m.text().await.unwrap();
        assert!(!body.contains("prims_"), "{body}");
    }
    for token in ["token-of-tenant-a-0123", "token-of-tenant-b-4567"] {
        let m = get("/metrics", Some(token)).await.unwrap();
        assert_eq!(m.status(), StatusCode::OK);
        assert!(
            m.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/plain"),
            "{:?}",
            m.headers()
        );
        let body = m.text().await.unwrap();
        assert!(body.contains("# TYPE prims_supervisor_up gauge"), "{body}");
    }
    // Open without a token: /health once the server is ready (503, with
    // what it waits for, until its template is up), /health/live at once.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while get("/health", None).await.unwrap().status() != StatusCode::OK {
        assert!(
            std::time::Instant::now() < deadline,
            "never ready:\n{}",
            stack.logs()
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    for path in ["/health", "/health/live"] {
        let h = get(path, None).await.unwrap();
        assert_eq!(h.status(), StatusCode::OK, "{path}");
        let v: Value = h.json().await.unwrap();
        assert_eq!(v["supervisor"], true, "{path}: {v}");
    }
}
