//! The branching tools through rmcp's own client against real processes:
//! fork_session's branches diverge, a checkpoint rolls a session back and
//! is listed as a resource, another tenant's session cannot be forked,
//! and bad input is refused with a message a model can act on.

mod support;

use rmcp::model::{ReadResourceRequestParams, ResourceContents};
use serde_json::json;
use support::client::{call, connect, err, ok, run};
use support::Stack;

const TOKENS: &str = "[[tokens]]\ntoken = \"token-of-tenant-a-0123\"\ntenant = \"a\"\n\
                      [[tokens]]\ntoken = \"token-of-tenant-b-4567\"\ntenant = \"b\"\n";
const A: &str = "token-of-tenant-a-0123";
const B: &str = "token-of-tenant-b-4567";

/// The names of a JSON array of strings, sorted.
fn sorted(v: &serde_json::Value) -> Vec<&str> {
    let mut names: Vec<&str> = v
        .as_array()
        .map(|a| a.iter().filter_map(|s| s.as_str()).collect())
        .unwrap_or_default();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread")]
async fn three_branches_try_three_approaches_and_the_source_keeps_its_own() {
    let stack = Stack::start("", Some(TOKENS));
    let c = connect(&stack.url(), Some(A)).await;
    let set = run(
        &c,
        "data = [5, 3, 8, 1]\nscore = lambda xs: xs[0]\nopen('plan.txt', 'w').write('base')",
        None,
    )
    .await;
    let sid = set["session_id"].as_str().unwrap().to_owned();
    let f = ok(&call(&c, "fork_session", json!({"session_id": sid, "count": 3})).await);
    let branches = f["sessions"].as_array().unwrap();
    assert_eq!(branches.len(), 3);
    assert!(
        f["duration_ms"].is_u64() && f["source_paused_ms"].is_u64(),
        "{f}"
    );
    let approaches = ["sorted(data)", "sorted(data, reverse=True)", "data[::-1]"];
    let mut scores = Vec::new();
    for (b, how) in branches.iter().zip(approaches) {
        assert_eq!(sorted(&b["restored"]), ["data", "score"], "{b}");
        assert_eq!(b["not_restored"], json!({}));
        let bid = b["session_id"].as_str().unwrap();
        let code =
            format!("data = {how}\nopen('plan.txt', 'w').write({how:?})\nprint(score(data))");
        let r = run(&c, &code, Some(bid)).await;
        assert_eq!(r["session_id"], bid);
        scores.push(r["stdout"].as_str().unwrap().trim().to_owned());
    }
    assert_eq!(scores, ["1", "8", "1"]);
    let back = run(&c, "print(data, open('plan.txt').read())", Some(&sid)).await;
    assert_eq!(back["stdout"], "[5, 3, 8, 1] base\n");

    // Another tenant cannot branch it, and learns nothing of it.
    let b = connect(&stack.url(), Some(B)).await;
    let e = err(&call(&b, "fork_session", json!({"session_id": sid})).await);
    assert!(e.contains("does not exist"), "{e}");
    let e = err(&call(&c, "fork_session", json!({"session_id": sid, "count": 0})).await);
    assert!(e.contains("1 to 4"), "{e}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_checkpoint_rolls_back_and_is_listed_as_a_resource() {
    let stack = Stack::start("", None);
    let c = connect(&stack.url(), None).await;
    let r = run(
        &c,
        "rows = [1, 2]\ndef total():\n    return sum(rows)",
        None,
    )
    .await;
    let sid = r["session_id"].as_str().unwrap().to_owned();
    let k = ok(&call(
        &c,
        "checkpoint_session",
        json!({"session_id": sid, "label": "two rows"}),
    )
    .await);
    let id = k["checkpoint_id"].as_str().unwrap().to_owned();
    assert_eq!(k["label"], "two rows");
    assert!(k["bytes"].as_u64().unwrap() > 0);
    run(&c, "rows.append(100)\nbroken = True", Some(&sid)).await;

    let res = c
        .read_resource(ReadResourceRequestParams::new(format!(
            "prims://sessions/{sid}/checkpoints"
        )))
        .await
        .expect("resources/read");
    let ResourceContents::TextResourceContents { text, .. } = &res.contents[0] else {
        panic!("{res:?}");
    };
    let listed: serde_json::Value = serde_json::from_str(text).unwrap();
    assert_eq!(listed["checkpoints"][0]["checkpoint_id"], id.as_str());
    assert_eq!(listed["checkpoints"][0]["label"], "two rows");

    let back = ok(&call(
        &c,
        "restore_checkpoint",
        json!({"session_id": sid, "checkpoint_id": id}),
    )
    .await);
    assert_eq!(sorted(&back["restored"]), ["rows", "total"]);
    let r = run(&c, "print(total(), 'broken' in globals())", Some(&sid)).await;
    assert_eq!(r["stdout"], "3 False\n");
    let e = err(&call(
        &c,
        "restore_checkpoint",
        json!({"session_id": sid, "checkpoint_id": "nope"}),
    )
    .await);
    assert!(e.contains("no checkpoint"), "{e}");
}
