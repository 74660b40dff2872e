//! Resources and tasks hold the tools' tenant rules: with bearer tokens,
//! tenant b cannot read, list, watch or poll what tenant a made, and sees
//! exactly the error a missing thing gives.

#![allow(deprecated)] // resources/subscribe: what legacy-era clients have

mod support;

use rmcp::model::{
    CallToolResponse, GetTaskParams, ReadResourceRequestParams, ReadResourceResult,
    SubscribeRequestParams,
};
use serde_json::json;
use support::client::{connect, connect_tasks, connect_tasks_stateless, ok, params, TaskMcp};
use support::Stack;

const TOKENS: &str = "[[tokens]]\ntoken = \"token-of-tenant-a-0123\"\ntenant = \"a\"\n\
                      [[tokens]]\ntoken = \"token-of-tenant-b-4567\"\ntenant = \"b\"\n";
const A: &str = "token-of-tenant-a-0123";
const B: &str = "token-of-tenant-b-4567";

async fn read(c: &TaskMcp, uri: &str) -> Result<ReadResourceResult, rmcp::ServiceError> {
    c.read_resource(ReadResourceRequestParams::new(uri.to_owned()))
        .await
}

fn code_of(e: &rmcp::ServiceError) -> i32 {
    match e {
        rmcp::ServiceError::McpError(d) => d.code.0,
        other => panic!("not an MCP error: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_tenant_gets_not_found_for_files_watches_and_tasks() {
    let stack = Stack::start("", Some(TOKENS));
    let a = connect_tasks(&stack.url(), Some(A)).await;
    let code = "import os\nos.makedirs('output', exist_ok=True)\n\
                open('output/secret.txt','w').write('s3cret')";
    let plain = connect(&stack.url(), Some(A)).await;
    let r = ok(&plain
        .call_tool(params("run_code", json!({ "code": code })))
        .await
        .unwrap());
    let sid = r["session_id"].as_str().unwrap().to_owned();
    // Tasks are made on 2026-07-28 requests.
    let modern = connect_tasks_stateless(&stack.url(), Some(A)).await;
    let task = match modern
        .call_tool_once(params("run_code", json!({"code": "1", "session_id": sid})))
        .await
        .unwrap()
    {
        CallToolResponse::Task(t) => t.task.task_id,
        other => panic!("{other:?}"),
    };
    let uri = format!("prims://sessions/{sid}/output/secret.txt");
    let missing = format!("prims://sessions/{sid}/output/none.txt");
    let mine = read(&a, &uri).await.expect("tenant a reads its own file");
    assert!(format!("{mine:?}").contains("s3cret"));

    let b = connect_tasks(&stack.url(), Some(B)).await;
    let theirs = read(&b, &uri)
        .await
        .expect_err("tenant b read tenant a's file");
    assert!(!format!("{theirs:?}").contains("s3cret"));
    // The same error as a missing file: nothing tells b the session exists.
    let nothing = read(&a, &missing).await.expect_err("a missing file");
    assert_eq!(
        code_of(&theirs),
        code_of(&nothing),
        "{theirs:?} vs {nothing:?}"
    );
    assert!(
        b.subscribe(SubscribeRequestParams::new(uri.clone()))
            .await
            .is_err(),
        "tenant b watches tenant a's file"
    );
    let listed = b.list_resources(None).await.expect("tenant b lists");
    assert!(
        listed.resources.iter().all(|r| !r.uri.contains(&sid)),
        "{listed:?}"
    );
    let e = b.get_task(GetTaskParams::new(&task)).await.unwrap_err();
    assert!(e.to_string().contains("no task"), "{e}");
    assert!(b
        .cancel_task(rmcp::model::CancelTaskParams::new(&task))
        .await
        .is_err());
    assert!(a.get_task(GetTaskParams::new(&task)).await.is_ok());
}
