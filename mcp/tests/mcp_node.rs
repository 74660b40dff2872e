//! One node of a cluster (`--node 2`): every id it issues names it, and a
//! request for another node's session, which a router sends here only when
//! that node is down, gets an error that says the session is gone, never a
//! new empty workspace, in both protocol eras.

mod support;

use serde_json::{json, Value};
use support::client::{call, connect, connect_stateless, err, run};
use support::Stack;

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
const CALL: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"print(1)"}}}"#;

async fn post(url: &str, body: &str, session: Option<&str>) -> reqwest::Response {
    let mut req = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .body(body.to_owned());
    if let Some(s) = session {
        req = req.header("mcp-session-id", s);
    }
    req.send().await.expect("POST /mcp")
}

/// How many sessions the supervisor holds, and how many runs it started.
async fn sessions(stack: &Stack) -> (u64, u64) {
    let stats = stack.supervisor().await.stats().await.expect("stats");
    (stats.sessions, stats.runs_total)
}

#[tokio::test(flavor = "multi_thread")]
async fn ids_name_the_node_in_both_eras() {
    let stack = Stack::start_node(2);
    let init = post(&stack.url(), INIT, None).await;
    assert_eq!(init.status(), 200);
    let mcp = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(mcp.starts_with("0002-"), "Mcp-Session-Id {mcp}");

    let legacy = connect(&stack.url(), None).await;
    let r = run(&legacy, "x = 1", None).await;
    let sid = r["session_id"].as_str().expect("session_id").to_owned();
    assert!(sid.starts_with("0002") && !sid.contains('-'), "{sid}");
    let stateless = connect_stateless(&stack.url()).await;
    let again = run(&stateless, "print(x)", Some(&sid)).await;
    assert_eq!(again["stdout"], "1\n", "{again}");
}

#[tokio::test(flavor = "multi_thread")]
async fn another_nodes_legacy_session_gets_404_that_says_it_is_gone() {
    let stack = Stack::start_node(2);
    let init = post(&stack.url(), INIT, None).await;
    let mine = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let before = sessions(&stack).await;

    // The same id with node 1's prefix: what a client of lost node 1 sends.
    let theirs = format!("0001-{}", &mine[5..]);
    let resp = post(&stack.url(), CALL, Some(&theirs)).await;
    assert_eq!(resp.status(), 404);
    let ctype = resp.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(ctype.starts_with("application/json"), "{ctype}");
    let body: Value = resp.json().await.expect("a JSON-RPC error body");
    assert_eq!(body["error"]["code"], -32001, "{body}");
    assert_eq!(body["id"], Value::Null, "{body}");
    let msg = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("lives on PRIMS node 1") && msg.contains("down or gone"),
        "{msg}"
    );
    assert!(msg.contains("Start a new MCP session"), "{msg}");
    assert_eq!(
        sessions(&stack).await,
        before,
        "no workspace was opened, no code ran"
    );

    // An id of this node that it does not hold (expired, or issued before
    // a restart): rmcp's own 404, without the other-node message.
    let unknown = post(&stack.url(), CALL, Some("0002-nosuchsession")).await;
    assert_eq!(unknown.status(), 404);
    let text = unknown.text().await.unwrap_or_default();
    assert!(!text.contains("lives on PRIMS node"), "{text}");
    // A malformed id is not taken for another node's.
    let odd = post(&stack.url(), CALL, Some("0001nodash")).await;
    assert_eq!(odd.status(), 404);
    assert!(!odd.text().await.unwrap_or_default().contains("PRIMS node"));
    // The node's own session still works.
    let ok = post(&stack.url(), CALL, Some(&mine)).await;
    assert_ne!(ok.status(), 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn another_nodes_session_id_is_a_tool_error_not_a_new_workspace() {
    let stack = Stack::start_node(2);
    let c = connect_stateless(&stack.url()).await;
    let sid = run(&c, "1", None).await["session_id"]
        .as_str()
        .expect("session_id")
        .to_owned();
    let before = sessions(&stack).await;
    let theirs = format!("0001{}", &sid[4..]);
    for (tool, args) in [
        (
            "run_code",
            json!({ "code": "print(1)", "session_id": theirs }),
        ),
        ("list_dir", json!({ "dir_path": ".", "session_id": theirs })),
    ] {
        let msg = err(&call(&c, tool, args).await);
        assert!(
            msg.contains("lives on PRIMS node 1") && msg.contains("down or gone"),
            "{tool}: {msg}"
        );
    }
    assert_eq!(
        sessions(&stack).await,
        before,
        "no workspace was opened, no code ran"
    );
}
