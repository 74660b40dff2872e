use super::*;
use prims_protocol::jail::{Outcome, Status};
use prims_protocol::wire::{Interpreter, InterpreterState, TaskStatus};

fn reply(stdout: usize) -> RunReply {
    RunReply {
        outcome: Outcome {
            status: Status::Ok,
            ..Default::default()
        },
        stdout: vec![b'x'; stdout],
        stderr: Vec::new(),
        stdout_truncated: false,
        stderr_truncated: false,
        files: Vec::new(),
        env_built: false,
        interpreter: Interpreter {
            state: InterpreterState::Kept,
            reason: None,
            warm: false,
            result: None,
            result_truncated: false,
            restored: Vec::new(),
            not_restored: Vec::new(),
            reason_message: None,
            installed: Vec::new(),
            saved_at: None,
            last_run_lost: false,
        },
        network: None,
        outputs: Vec::new(),
        outputs_dropped: 0,
    }
}

/// One tenant's budget is the whole server's.
fn limits(max_tasks: usize, max_result_bytes: usize) -> TaskLimits {
    budgets((max_tasks, max_result_bytes), (max_tasks, max_result_bytes))
}

/// `(tasks, result bytes)` per tenant, and for the server.
fn budgets(tenant: (usize, usize), server: (usize, usize)) -> TaskLimits {
    TaskLimits {
        default_ttl: Duration::from_secs(60),
        max_ttl: Duration::from_secs(120),
        max_tasks_per_tenant: tenant.0,
        max_result_bytes_per_tenant: tenant.1,
        max_tasks: server.0,
        max_result_bytes: server.1,
    }
}

/// A reply that costs exactly `n` bytes to keep.
fn costing(n: usize) -> Result<RunReply, ErrorReply> {
    let r = Ok(reply(n - 256));
    assert_eq!(registry::cost(&r), n);
    r
}

fn status(t: &Tasks, id: &str, tenant: Option<&str>) -> TaskStatus {
    t.get(id, tenant).unwrap().status
}

#[test]
fn a_task_goes_from_working_to_completed_for_its_tenant_only() {
    let t = Tasks::new(limits(8, 1 << 20), CancellationToken::new());
    let (info, _) = t.create("s1", Some("acme"), None).unwrap();
    assert_eq!(info.status, TaskStatus::Working);
    assert_eq!(info.ttl_ms, 60_000);
    assert_eq!(info.task_id.len(), 32);
    t.finish(&info.task_id, Ok(reply(10)));
    let got = t.get(&info.task_id, Some("acme")).unwrap();
    assert_eq!(got.status, TaskStatus::Completed);
    assert_eq!(got.result.unwrap().stdout.len(), 10);
    let other = t.get(&info.task_id, Some("other")).unwrap_err();
    assert_eq!(other.code, ErrorCode::NotFound);
    assert_eq!(
        t.get(&info.task_id, None).unwrap_err().code,
        ErrorCode::NotFound
    );
    // A client asks for a longer TTL than allowed: capped.
    let (long, _) = t.create("s1", None, Some(10_000_000)).unwrap();
    assert_eq!(long.ttl_ms, 120_000);
}

#[test]
fn cancel_fires_the_token_and_sticks() {
    let t = Tasks::new(limits(8, 1 << 20), CancellationToken::new());
    let (info, token) = t.create("s", None, None).unwrap();
    let after = t.cancel(&info.task_id, None).unwrap();
    assert!(token.is_cancelled());
    assert_eq!(after.status, TaskStatus::Cancelled);
    // The run's late reply does not overwrite the cancellation.
    t.finish(&info.task_id, Ok(reply(1)));
    assert_eq!(
        t.get(&info.task_id, None).unwrap().status,
        TaskStatus::Cancelled
    );
}

#[test]
fn results_beyond_the_byte_cap_evict_the_oldest() {
    let t = Tasks::new(limits(8, 3000), CancellationToken::new());
    let (a, _) = t.create("s", None, None).unwrap();
    let (b, _) = t.create("s", None, None).unwrap();
    t.finish(&a.task_id, Ok(reply(1500)));
    t.finish(&b.task_id, Ok(reply(1500)));
    assert_eq!(t.get(&a.task_id, None).unwrap().status, TaskStatus::Evicted);
    assert_eq!(
        t.get(&b.task_id, None).unwrap().status,
        TaskStatus::Completed
    );
    // One result larger than the whole cap is never kept.
    let (c, _) = t.create("s", None, None).unwrap();
    t.finish(&c.task_id, Ok(reply(4000)));
    assert_eq!(t.get(&c.task_id, None).unwrap().status, TaskStatus::Evicted);
    assert_eq!(
        t.get(&b.task_id, None).unwrap().status,
        TaskStatus::Completed
    );
}

#[test]
fn the_task_cap_drops_finished_tasks_and_refuses_when_all_work() {
    let t = Tasks::new(limits(2, 1 << 20), CancellationToken::new());
    let (a, _) = t.create("s", None, None).unwrap();
    let (_b, _) = t.create("s", None, None).unwrap();
    assert_eq!(t.create("s", None, None).unwrap_err().code, ErrorCode::Busy);
    t.finish(&a.task_id, Ok(reply(1)));
    let (_c, _) = t.create("s", None, None).unwrap();
    assert_eq!(
        t.get(&a.task_id, None).unwrap_err().code,
        ErrorCode::NotFound
    );
    assert_eq!(t.counts(), (2, 2));
}

#[test]
fn finished_tasks_expire_after_their_ttl_working_ones_never() {
    let t = Tasks::new(limits(8, 1 << 20), CancellationToken::new());
    let (a, _) = t.create("s", None, Some(1)).unwrap();
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(t.get(&a.task_id, None).unwrap().status, TaskStatus::Working);
    t.finish(&a.task_id, Ok(reply(1)));
    assert_eq!(
        t.get(&a.task_id, None).unwrap_err().code,
        ErrorCode::NotFound
    );
}

#[test]
fn a_shutdown_cancels_every_task() {
    let root = CancellationToken::new();
    let t = Tasks::new(limits(8, 1 << 20), root.clone());
    let (_, token) = t.create("s", None, None).unwrap();
    root.cancel();
    assert!(token.is_cancelled());
}

#[test]
fn one_tenants_results_only_push_out_its_own_within_its_budget() {
    let t = Tasks::new(budgets((8, 3000), (64, 1 << 20)), CancellationToken::new());
    let (a, _) = t.create("sa", Some("a"), None).unwrap();
    t.finish(&a.task_id, costing(1000));
    let b: Vec<String> = (0..4)
        .map(|_| t.create("sb", Some("b"), None).unwrap().0.task_id)
        .collect();
    for id in &b {
        t.finish(id, costing(1500));
    }
    // b's budget holds two of its results: its two oldest went, a's stays.
    let got: Vec<TaskStatus> = b.iter().map(|id| status(&t, id, Some("b"))).collect();
    use TaskStatus::{Completed, Evicted};
    assert_eq!(got, [Evicted, Evicted, Completed, Completed]);
    assert_eq!(status(&t, &a.task_id, Some("a")), Completed);
    let inner = t.inner();
    assert_eq!(inner.usage(Some("a")).bytes, 1000);
    assert_eq!(inner.usage(Some("b")).bytes, 3000);
}

#[test]
fn at_the_servers_byte_ceiling_a_tenant_drops_its_own_results_never_anothers() {
    let t = Tasks::new(budgets((8, 4000), (64, 5000)), CancellationToken::new());
    let (a, _) = t.create("sa", Some("a"), None).unwrap();
    t.finish(&a.task_id, costing(3500));
    let b: Vec<String> = (0..3)
        .map(|_| t.create("sb", Some("b"), None).unwrap().0.task_id)
        .collect();
    t.finish(&b[0], costing(1000));
    t.finish(&b[1], costing(1000)); // 5500 > 5000: b's first goes
    use TaskStatus::{Completed, Evicted};
    assert_eq!(status(&t, &b[0], Some("b")), Evicted);
    assert_eq!(status(&t, &b[1], Some("b")), Completed);
    // 2000 more: b's second goes, and still too much: so does this one.
    t.finish(&b[2], costing(2000));
    assert_eq!(status(&t, &b[1], Some("b")), Evicted);
    assert_eq!(status(&t, &b[2], Some("b")), Evicted);
    assert_eq!(status(&t, &a.task_id, Some("a")), Completed);
    let inner = t.inner();
    assert_eq!(inner.usage(Some("b")).bytes, 0);
    assert_eq!(inner.usage(Some("a")).bytes, 3500);
}

#[test]
fn a_result_larger_than_a_tenants_budget_is_not_kept() {
    let t = Tasks::new(budgets((8, 2000), (64, 1 << 20)), CancellationToken::new());
    let (small, _) = t.create("s", Some("a"), None).unwrap();
    t.finish(&small.task_id, costing(1000));
    let (big, _) = t.create("s", Some("a"), None).unwrap();
    t.finish(&big.task_id, costing(2001));
    assert_eq!(status(&t, &big.task_id, Some("a")), TaskStatus::Evicted);
    assert_eq!(status(&t, &small.task_id, Some("a")), TaskStatus::Completed);
}

#[test]
fn task_counts_are_per_tenant_and_a_full_server_refuses_as_busy() {
    let t = Tasks::new(
        budgets((2, 1 << 20), (3, 1 << 20)),
        CancellationToken::new(),
    );
    let (a, _) = t.create("sa", Some("a"), None).unwrap();
    t.finish(&a.task_id, costing(300));
    let (b1, _) = t.create("sb", Some("b"), None).unwrap();
    let (_b2, _) = t.create("sb", Some("b"), None).unwrap();
    // b's two tasks work: its third is refused, whatever a keeps.
    let refused = t.create("sb", Some("b"), None).unwrap_err();
    assert_eq!(refused.code, ErrorCode::Busy);
    assert!(
        refused.message.contains("you already have 2 tasks working"),
        "{}",
        refused.message
    );
    // With one of b's finished, b's next task takes that one's place.
    t.finish(&b1.task_id, costing(300));
    let (_b3, _) = t.create("sb", Some("b"), None).unwrap();
    assert_eq!(
        t.get(&b1.task_id, Some("b")).unwrap_err().code,
        ErrorCode::NotFound
    );
    assert_eq!(status(&t, &a.task_id, Some("a")), TaskStatus::Completed);
    // The server keeps 3, none a finished task of c's: c is refused, and
    // a's unread result stays.
    let full = t.create("sc", Some("c"), None).unwrap_err();
    assert_eq!(full.code, ErrorCode::Busy);
    assert!(
        full.message.contains("this server already keeps 3 tasks"),
        "{}",
        full.message
    );
    assert_eq!(status(&t, &a.task_id, Some("a")), TaskStatus::Completed);
    // a may make room from its own finished task.
    let (a2, _) = t.create("sa", Some("a"), None).unwrap();
    assert_eq!(
        t.get(&a.task_id, Some("a")).unwrap_err().code,
        ErrorCode::NotFound
    );
    assert_eq!(status(&t, &a2.task_id, Some("a")), TaskStatus::Working);
    assert_eq!(t.counts(), (3, 3));
}

#[test]
fn no_tenant_is_one_tenant_with_one_budget() {
    let t = Tasks::new(
        budgets((2, 1 << 20), (8, 1 << 20)),
        CancellationToken::new(),
    );
    t.create("s1", None, None).unwrap();
    t.create("s2", None, None).unwrap();
    let e = t.create("s3", None, None).unwrap_err();
    assert_eq!(e.code, ErrorCode::Busy);
    // A named tenant has its own budget beside it.
    t.create("s4", Some("a"), None).unwrap();
}

#[test]
fn new_limits_apply_to_new_tasks() {
    let t = Tasks::new(
        budgets((1, 1 << 20), (8, 1 << 20)),
        CancellationToken::new(),
    );
    let (first, _) = t.create("s", Some("a"), None).unwrap();
    assert_eq!(
        t.create("s", Some("a"), None).unwrap_err().code,
        ErrorCode::Busy
    );
    let mut wider = budgets((4, 1 << 20), (8, 1 << 20));
    wider.default_ttl = Duration::from_secs(90);
    t.set_limits(wider);
    let (second, _) = t.create("s", Some("a"), None).unwrap();
    assert_eq!(second.ttl_ms, 90_000);
    // The task already kept keeps its TTL.
    assert_eq!(t.get(&first.task_id, Some("a")).unwrap().ttl_ms, 60_000);
}

#[test]
fn the_usage_drains_to_nothing_as_tasks_leave() {
    let t = Tasks::new(budgets((4, 5000), (16, 8000)), CancellationToken::new());
    for tenant in [Some("a"), Some("b"), None] {
        for n in [1000, 3000, 2500] {
            let (i, _) = t.create("s", tenant, Some(1)).unwrap();
            t.finish(&i.task_id, costing(n));
        }
        let (c, _) = t.create("s", tenant, Some(1)).unwrap();
        t.cancel(&c.task_id, tenant).unwrap();
    }
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(t.counts(), (0, 12));
    let inner = &mut t.inner();
    inner.expire(SystemTime::now());
    assert_eq!(inner.len(), 0);
    for tenant in [Some("a"), Some("b"), None] {
        assert_eq!(inner.usage(tenant), registry::Usage::default());
    }
}
