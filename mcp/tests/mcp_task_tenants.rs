//! Task results across tenants, against a real server with two (three)
//! bearer tokens mapped to tenants: one tenant's tasks push out only its
//! own results, never another tenant's unread one, and a tenant at its
//! budget, or at the server's ceiling, is refused with a busy error that
//! says what to do. The budgets come from the policy and follow a reload.

mod support;

use rmcp::model::{CallToolResult, CancelTaskParams, GetTaskParams};
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use support::client::{connect_tasks_stateless, TaskMcp};
use support::tasks::{completed, start_task, structured, text, try_start_task, wait};
use support::Stack;

const A: &str = "token-of-tenant-a-0123";
const B: &str = "token-of-tenant-b-4567";
const C: &str = "token-of-tenant-c-89ab";
const TOKENS: &str = "[[tokens]]\ntoken = \"token-of-tenant-a-0123\"\ntenant = \"a\"\n\
                      [[tokens]]\ntoken = \"token-of-tenant-b-4567\"\ntenant = \"b\"\n\
                      [[tokens]]\ntoken = \"token-of-tenant-c-89ab\"\ntenant = \"c\"\n";

/// Wait until the supervisor has no task working.
async fn idle(stack: &Stack, within: Duration) {
    let sup = stack.supervisor().await;
    let deadline = Instant::now() + within;
    while sup.stats().await.expect("stats").tasks_working != 0 {
        assert!(
            Instant::now() < deadline,
            "tasks still working after {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn refusal(r: &CallToolResult) -> String {
    assert_eq!(r.is_error, Some(true), "expected a refusal: {r:?}");
    let v: Value = serde_json::to_value(r).expect("result JSON");
    text(v.as_object().expect("result object"))
}

/// Runs under the default policy (no `[tasks]` section): tenant b's 36
/// results of 2 MiB each (stdout and stderr full at `limits.output_bytes`)
/// are more than a tenant may keep (16 MiB) and more than the server keeps
/// (64 MiB); tenant a's small one was there first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_tenants_tasks_never_push_out_an_unread_result() {
    let stack = Stack::start("", Some(TOKENS));
    let a = connect_tasks_stateless(&stack.url(), Some(A)).await;
    let b = connect_tasks_stateless(&stack.url(), Some(B)).await;
    let kept = start_task(&a, json!({"code": "print('a result nobody read yet')"})).await;
    idle(&stack, Duration::from_secs(60)).await;

    let big =
        "import sys\nsys.stdout.write('o' * (1 << 20))\nsys.stderr.write('e' * (1 << 20))\npass";
    let first = start_task(&b, json!({ "code": big })).await;
    let session = structured(&wait(&b, &first, Duration::from_secs(60)).await)["session_id"]
        .as_str()
        .expect("session_id")
        .to_owned();
    let mut ids = vec![first];
    for _ in 1..36 {
        ids.push(start_task(&b, json!({ "code": big, "session_id": session })).await);
    }
    idle(&stack, Duration::from_secs(180)).await;

    // a's result is whole: b's tasks could not drop it.
    let t = wait(&a, &kept, Duration::from_secs(5)).await;
    let result = completed(&t);
    assert_ne!(
        result.get("isError"),
        Some(&Value::Bool(true)),
        "tenant a's unread result was dropped by tenant b's tasks: {}",
        text(result)
    );
    assert_eq!(
        structured(&t)["stdout"],
        "a result nobody read yet\n",
        "{result:?}"
    );
    // b paid for its own: its oldest results went, its newest are kept.
    let mut states = Vec::new();
    for id in &ids {
        let t = wait(&b, id, Duration::from_secs(5)).await;
        let r = completed(&t);
        states.push(r.get("isError") == Some(&Value::Bool(true)));
        if r.get("isError") == Some(&Value::Bool(true)) {
            let msg = text(r);
            assert!(msg.contains("was dropped"), "{msg}");
        } else {
            let out = structured(&t);
            assert_eq!(out["stdout"].as_str().map(str::len), Some(1 << 20));
        }
    }
    // The first finished before the others started; the rest share one
    // session, whose runs need not finish in the order they were asked for.
    assert!(states[0], "b's oldest result was kept: {states:?}");
    let dropped = states.iter().filter(|d| **d).count();
    assert_eq!(
        dropped, 29,
        "b keeps seven 2 MiB results in 16 MiB: {states:?}"
    );
}

/// Budgets from the policy: b at its own budget is refused, c at the
/// server's ceiling is refused, a makes room from its own finished task;
/// a reload (SIGHUP) widens b's budget for its next task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budgets_refuse_as_busy_and_follow_a_reload() {
    let policy = "[limits]\nmax_concurrent_runs = 4\n\
                  [tasks]\nmax_tasks_per_tenant = 2\nmax_tasks = 3\n";
    let stack = Stack::start(policy, Some(TOKENS));
    let a = connect_tasks_stateless(&stack.url(), Some(A)).await;
    let b = connect_tasks_stateless(&stack.url(), Some(B)).await;
    let c = connect_tasks_stateless(&stack.url(), Some(C)).await;
    let sleep = json!({"code": "import time\ntime.sleep(600)"});

    let b1 = start_task(&b, sleep.clone()).await;
    let _b2 = start_task(&b, sleep.clone()).await;
    let mine = refusal(&try_start_task(&b, sleep.clone()).await.unwrap_err());
    assert!(
        mine.contains("busy") && mine.contains("you already have 2 tasks working"),
        "{mine}"
    );
    assert!(mine.contains("tasks/cancel"), "{mine}");

    let a1 = start_task(&a, json!({"code": "print('a1')"})).await;
    let full = refusal(
        &try_start_task(&c, json!({"code": "print('c')"}))
            .await
            .unwrap_err(),
    );
    assert!(
        full.contains("busy") && full.contains("this server already keeps 3 tasks"),
        "{full}"
    );

    // a's finished task makes room for a's next one: a's own, nobody else's.
    let done = structured(&wait(&a, &a1, Duration::from_secs(60)).await);
    assert_eq!(done["stdout"], "a1\n", "{done}");
    let _a2 = start_task(&a, json!({"code": "print('a2')"})).await;
    let gone = a.get_task(GetTaskParams::new(&a1)).await.unwrap_err();
    assert!(gone.to_string().contains("no task"), "{gone}");

    // b cancels one of its own: its next task takes that one's place.
    b.cancel_task(CancelTaskParams::new(&b1))
        .await
        .expect("tasks/cancel");
    let _b3 = start_task(&b, sleep.clone()).await;
    let gone = b.get_task(GetTaskParams::new(&b1)).await.unwrap_err();
    assert!(gone.to_string().contains("no task"), "{gone}");
    refusal(&try_start_task(&b, sleep.clone()).await.unwrap_err());

    // A reload widens the budgets for the tasks that start from then on.
    let path = stack.dir.join("policy.toml");
    let text = std::fs::read_to_string(&path).expect("policy");
    let wider = (text.replace("max_tasks_per_tenant = 2", "max_tasks_per_tenant = 3"))
        .replace("max_tasks = 3", "max_tasks = 8");
    assert_ne!(wider, text, "{text}");
    std::fs::write(&path, wider).expect("policy");
    // SAFETY: kill has no memory preconditions; the pid is our own child.
    let hup = unsafe { libc::kill(stack.supervisor_pid() as i32, libc::SIGHUP) };
    assert_eq!(hup, 0);
    wait_until_started(&b, sleep, Duration::from_secs(10)).await;
    let sup = stack.supervisor().await;
    let stats = sup.stats().await.expect("stats");
    assert_eq!(stats.tasks_kept, 4, "{stats:?}");
}

/// Start a task, retrying refusals until `within` (a reload is applied
/// asynchronously).
async fn wait_until_started(c: &TaskMcp, args: Value, within: Duration) -> String {
    let deadline = Instant::now() + within;
    loop {
        match try_start_task(c, args.clone()).await {
            Ok(id) => return id,
            Err(r) => {
                let why = refusal(&r);
                assert!(Instant::now() < deadline, "still refused: {why}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}
