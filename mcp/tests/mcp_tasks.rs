//! run_code as an MCP task (SEP-2663) against a real supervisor and jail:
//! the run outlives its HTTP connection and a SIGKILLed front-end, cancel
//! kills the jail, and clients that do not declare the extension keep the
//! direct call.

mod support;

use rmcp::model::{CallToolResponse, CancelTaskParams, GetTaskParams, TaskPayload, TaskStatus};
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use support::client::{connect, connect_tasks_2025_11_25, connect_tasks_stateless, params};
use support::tasks::{get, start_task, structured, wait};
use support::Stack;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sixty_second_task_survives_a_killed_connection_and_front_end() {
    let mut stack = Stack::start("[limits]\nwall_time = \"2m\"\n", None);
    let started = Instant::now();
    let id = {
        let c = connect_tasks_stateless(&stack.url(), None).await;
        let id = start_task(
            &c,
            json!({"code": "import time\nx = 41\ntime.sleep(60)\nprint('done', x + 1)"}),
        )
        .await;
        assert_eq!(get(&c, &id).await.status(), TaskStatus::Working);
        // Drop the HTTP connection without a goodbye, then SIGKILL the front-end.
        drop(c);
        id
    };
    stack.restart_frontend();
    // A new client, on the new front-end, polls the task.
    let c = connect_tasks_stateless(&stack.url(), None).await;
    assert_eq!(get(&c, &id).await.status(), TaskStatus::Working);
    let t = wait(&c, &id, Duration::from_secs(110)).await;
    assert!(started.elapsed() >= Duration::from_secs(60));
    assert_eq!(t.status(), TaskStatus::Completed, "{t:?}");
    let out = structured(&t);
    assert_eq!(out["stdout"], "done 42\n", "{out}");
    assert_eq!(out["status"], "ok", "{out}");
    assert!(out["duration_ms"].as_u64().unwrap() >= 60_000, "{out}");
    // The result stays for later polls, the same each time.
    assert_eq!(structured(&get(&c, &id).await), out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_kills_the_jail_and_the_task_says_cancelled() {
    let stack = Stack::start("", None);
    let c = connect_tasks_stateless(&stack.url(), None).await;
    let id = start_task(&c, json!({"code": "import time\ntime.sleep(600)"})).await;
    let sup = stack.supervisor().await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while sup.stats().await.unwrap().runs_active == 0 {
        assert_eq!(sup.stats().await.unwrap().tasks_working, 1);
        assert!(Instant::now() < deadline, "the task's run never started");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    c.cancel_task(CancelTaskParams::new(&id))
        .await
        .expect("tasks/cancel");
    let t = wait(&c, &id, Duration::from_secs(5)).await;
    assert_eq!(t.status(), TaskStatus::Cancelled, "{t:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while sup.stats().await.unwrap().runs_active != 0 {
        assert!(
            Instant::now() < deadline,
            "the cancelled run is still active"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let stats = sup.stats().await.unwrap();
    assert_eq!((stats.tasks_working, stats.tasks_kept), (0, 1), "{stats:?}");
    // Cancelling a finished task changes nothing.
    c.cancel_task(CancelTaskParams::new(&id))
        .await
        .expect("tasks/cancel again");
    assert_eq!(get(&c, &id).await.status(), TaskStatus::Cancelled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_result_is_the_direct_result_and_errors_stay_direct() {
    let stack = Stack::start("", None);
    let c = connect_tasks_stateless(&stack.url(), None).await;
    let id = start_task(&c, json!({"code": "import os\nos.makedirs('output', exist_ok=True)\nopen('output/r.txt','w').write('hi')\n6*7"})).await;
    let t = wait(&c, &id, Duration::from_secs(60)).await;
    let TaskPayload::Completed { result } = &t.payload else {
        panic!("{t:?}");
    };
    let out = &result["structuredContent"];
    assert_eq!(out["result"], "42", "{out}");
    assert_eq!(out["state"], "new", "{out}");
    // The new artifact comes as a resource_link, as in a direct call.
    let links: Vec<&Value> = (result["content"].as_array().unwrap().iter())
        .filter(|b| b["type"] == "resource_link")
        .collect();
    assert_eq!(links.len(), 1, "{result:?}");
    let session = out["session_id"].as_str().unwrap();
    assert_eq!(
        links[0]["uri"],
        format!("prims://sessions/{session}/output/r.txt")
    );
    // The same session keeps its interpreter through a task.
    let id2 = start_task(&c, json!({"code": "_ + 1", "session_id": session})).await;
    let out2 = structured(&wait(&c, &id2, Duration::from_secs(60)).await);
    assert_eq!(out2["state"], "kept", "{out2}");

    // What fails before the run is answered directly, as an isError result.
    match c
        .call_tool_once(params(
            "run_code",
            json!({"code": "1", "session_id": "0".repeat(32)}),
        ))
        .await
    {
        Ok(CallToolResponse::Complete(r)) => assert_eq!(r.is_error, Some(true), "{r:?}"),
        other => panic!("expected a direct error: {other:?}"),
    }
    // An unknown task is an invalid-params error.
    let e = c
        .get_task(GetTaskParams::new("f".repeat(32)))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("no task"), "{e}");

    // A 2025-11-25 client gets the direct call even when it declares the
    // extension (the Inspector does): tasks are server-directed from
    // 2026-07-28 on, and were asked for per request before.
    let legacy = connect_tasks_2025_11_25(&stack.url()).await;
    match legacy
        .call_tool_once(params("run_code", json!({"code": "print(2)"})))
        .await
    {
        Ok(CallToolResponse::Complete(r)) => assert_ne!(r.is_error, Some(true), "{r:?}"),
        other => panic!("a legacy client got {other:?}"),
    }

    // A client without the extension gets the direct call, and no tasks/get.
    let plain = connect(&stack.url(), None).await;
    match plain
        .call_tool_once(params("run_code", json!({"code": "print(1)"})))
        .await
    {
        Ok(CallToolResponse::Complete(r)) => assert_ne!(r.is_error, Some(true), "{r:?}"),
        other => panic!("a plain client got {other:?}"),
    }
    let e = plain.get_task(GetTaskParams::new(&id)).await.unwrap_err();
    assert!(
        e.to_string().contains("-32021") || e.to_string().to_lowercase().contains("capabilit"),
        "{e}"
    );
}
