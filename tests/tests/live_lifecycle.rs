//! The life of live interpreters on a real supervisor: stopped when idle
//! and for room under the caps (globals saved and restored), replaced
//! after a cancel or a supervisor restart, claimed warm from the pool (and
//! confined exactly like a cold one), and counted in the supervisor's
//! figures.

use prims_protocol::client::{Client, ClientError};
use prims_protocol::jail::Status;
use prims_protocol::wire::{
    ErrorCode, Event, InterpreterState, NotRestored, RequestBody, ResetReason, RunRequest,
};
use prims_tests::daemon::{run_req, Daemon};
use prims_tests::live::*;

fn sorted(names: &[String]) -> Vec<&str> {
    let mut v: Vec<&str> = names.iter().map(String::as_str).collect();
    v.sort_unstable();
    v
}

#[tokio::test(flavor = "multi_thread")]
async fn live_lifecycle_an_idle_interpreter_is_stopped_and_its_globals_restored() {
    // Code defined in cells (a lambda, a function, a class) is carried
    // too, by value; a generator cannot be, and is named with why.
    let d = Daemon::start(&live_policy(&format!("{NO_POOL}idle_ttl = \"1s\""), ""));
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap().session_id;
    let set = run(
        &c,
        &s,
        "import json\nimport collections\nn = 5\nd = {'a': [1, 2]}\n\
         counts = collections.Counter('aab')\nf = lambda: n + 1\n\
         def g(x):\n    return x * n\n\
         class K:\n    def v(self):\n        return g(2)\n\
         gen = (i for i in range(2))",
    )
    .await;
    assert_eq!(set.outcome.status, Status::Ok, "{set:?}");

    wait_for_stats(&c, "the idle interpreter stopped", |s| {
        s.interpreters_live == 0
    })
    .await;
    // An interpreter being stopped stops counting as live when its save
    // begins (a task of its own, bounded by `save_timeout`), not when the
    // save ends: on a busy host the file comes later.
    let prims_dir = d.workspace(&s).join(".prims");
    wait_for_file(&prims_dir, "state.pickle");
    let state_file = prims_dir.join("state.pickle");

    let back = run(
        &c,
        &s,
        "print(n, d, counts['a'], json.dumps(d))\nprint(f(), g(3), K().v(), 'gen' in globals())",
    )
    .await;
    assert_reset(&back, ResetReason::StoppedIdle);
    assert_eq!(back.outcome.status, Status::Ok, "{back:?}");
    assert_eq!(
        stdout(&back),
        "5 {'a': [1, 2]} 2 {\"a\": [1, 2]}\n6 15 10 False\n"
    );
    assert_eq!(
        sorted(&back.interpreter.restored),
        ["K", "collections", "counts", "d", "f", "g", "json", "n"]
    );
    // The save stays on record until a newer one replaces it: a crash
    // before the next save restores it again.
    assert!(state_file.exists(), "the restore kept the last save");
    assert_eq!(
        back.interpreter.not_restored,
        [NotRestored {
            name: "gen".into(),
            why: "TypeError: cannot pickle 'generator' object".into(),
        }],
        "the global that could not be saved is named, with why"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn live_lifecycle_past_max_live_the_least_recently_used_is_stopped() {
    let d = Daemon::start(&live_policy(&format!("{NO_POOL}max_live = 1"), ""));
    let c = d.client().await;
    let a = c.open_session(None).await.unwrap().session_id;
    let b = c.open_session(None).await.unwrap().session_id;
    run(&c, &a, "a = 1").await;
    let in_b = run(&c, &b, "b = 2").await;
    assert_state(&in_b, InterpreterState::New, Some(ResetReason::FirstCall));
    assert_eq!(c.stats().await.unwrap().interpreters_live, 1);

    let back_a = run(&c, &a, "print(a)").await;
    assert_reset(&back_a, ResetReason::StoppedForRoom);
    assert_eq!(stdout(&back_a), "1\n");
    assert_eq!(back_a.interpreter.restored, ["a"]);
    assert!(back_a.interpreter.not_restored.is_empty());
    assert_eq!(c.stats().await.unwrap().interpreters_live, 1);

    let back_b = run(&c, &b, "print(b)").await;
    assert_reset(&back_b, ResetReason::StoppedForRoom);
    assert_eq!(stdout(&back_b), "2\n");
    assert_eq!(back_b.interpreter.restored, ["b"]);
}

/// A run of `code` in `sid` for `tenant`.
fn for_tenant(tenant: &str, sid: &str, code: &str) -> RunRequest {
    RunRequest {
        tenant: Some(tenant.into()),
        ..run_req(sid, code)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn live_lifecycle_past_max_live_per_tenant_only_that_tenant_yields() {
    let d = Daemon::start(&live_policy(
        &format!("{NO_POOL}max_live = 8\nmax_live_per_tenant = 1"),
        "",
    ));
    let c = d.client().await;
    let x = c.open_session(Some("t1")).await.unwrap().session_id;
    let y = c.open_session(Some("t1")).await.unwrap().session_id;
    let z = c.open_session(Some("t2")).await.unwrap().session_id;
    send(&c, for_tenant("t1", &x, "v = 'x'")).await;
    send(&c, for_tenant("t2", &z, "v = 'z'")).await;
    send(&c, for_tenant("t1", &y, "v = 'y'")).await;
    assert_eq!(c.stats().await.unwrap().interpreters_live, 2);

    let in_z = send(&c, for_tenant("t2", &z, "v")).await;
    assert_kept(&in_z);
    assert_eq!(in_z.interpreter.result.as_deref(), Some("'z'"));
    let in_x = send(&c, for_tenant("t1", &x, "v")).await;
    assert_reset(&in_x, ResetReason::StoppedForRoom);
    assert_eq!(in_x.interpreter.result.as_deref(), Some("'x'"));
}

#[tokio::test(flavor = "multi_thread")]
async fn live_lifecycle_a_pool_claim_is_warm_clean_and_confined() {
    // Cold, the server's fallback: a forked spare is `templates.rs`'s.
    let d = Daemon::start_with_python(
        &live_policy("pool_size = 1\nfork_templates = false", ""),
        "prewarm_imports = [\"sqlite3\", \"xml.dom.minidom\"]",
    );
    let c = d.client().await;
    let ready = wait_for_stats(&c, "a warm session in the pool", |s| s.pool_ready == 1).await;
    assert!(ready.pool_memory_bytes > 0, "{ready:?}");
    assert_eq!(ready.interpreters_live, 0, "a pooled one is no session's");

    let a = c.open_session(None).await.unwrap().session_id;
    let first = run(
        &c,
        &a,
        // IPython's own names (In, Out, get_ipython...) are no user code's.
        "print(sorted(k for k in globals() \
         if not k.startswith('_') and k not in get_ipython().user_ns_hidden))\n\
         import sys\n\
         print([m in sys.modules for m in ('sqlite3', 'xml.dom.minidom')])",
    )
    .await;
    assert_state(&first, InterpreterState::New, Some(ResetReason::FirstCall));
    assert!(first.interpreter.warm, "{first:?}");
    assert_eq!(
        stdout(&first),
        "[]\n[True, True]\n",
        "no user code ran before; the prewarm imports did"
    );

    let warm = run(&c, &a, CONFINEMENT).await;
    assert_kept(&warm);
    assert!(!warm.interpreter.warm, "warm is the first call's news");
    assert_eq!(stdout(&warm), CONFINED, "{}", stderr(&warm));

    // A cold interpreter in the same workspace is confined alike, and has
    // not imported what the pool's did.
    let cold = send(
        &c,
        fresh(
            &a,
            &format!("import sys\nprint('sqlite3' in sys.modules)\n{CONFINEMENT}"),
        ),
    )
    .await;
    assert_reset(&cold, ResetReason::FreshRequested);
    assert!(!cold.interpreter.warm);
    assert_eq!(stdout(&cold), format!("False\n{CONFINED}"));

    // Another session's workspace is nowhere in A's jail.
    let b = c.open_session(None).await.unwrap().session_id;
    run(&c, &b, "open('output/b-secret.txt', 'w').write('B')").await;
    let name = |sid: &str| {
        d.workspace(sid)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned()
    };
    let look = format!(
        "import os\n\
         hits = []\n\
         for top in ('/workspace', '/tmp', '/dev', '/etc'):\n\
         \x20   for root, dirs, files in os.walk(top):\n\
         \x20       hits += [os.path.join(root, f) for f in files + dirs if f == 'b-secret.txt']\n\
         print(hits)\n\
         mi = open('/proc/self/mountinfo').read()\n\
         print([w in mi for w in ({state:?}, {na:?}, {nb:?}, 'sessions')])",
        state = d.state.to_string_lossy(),
        na = name(&a),
        nb = name(&b),
    );
    let seen = send(&c, fresh(&a, &look)).await;
    assert_eq!(
        stdout(&seen),
        "[]\n[False, False, False, False]\n",
        "{}",
        stderr(&seen)
    );

    wait_for_stats(&c, "the pool refilled", |s| s.pool_ready == 1).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn live_lifecycle_the_figures_count_live_interpreters() {
    let d = Daemon::start(&live_policy(NO_POOL, ""));
    let c = d.client().await;
    let none = c.stats().await.unwrap();
    assert_eq!(
        (
            none.interpreters_live,
            none.pool_ready,
            none.interpreters_memory_bytes
        ),
        (0, 0, 0)
    );
    let a = c.open_session(None).await.unwrap().session_id;
    let b = c.open_session(None).await.unwrap().session_id;
    run(&c, &a, "x = 1").await;
    let one = c.stats().await.unwrap();
    assert_eq!(one.interpreters_live, 1);
    assert!(
        one.interpreters_memory_bytes > 0,
        "the cgroup's count: {one:?}"
    );
    run(&c, &b, "x = 1").await;
    assert_eq!(c.stats().await.unwrap().interpreters_live, 2);

    let exited = run(&c, &b, "import os\nos._exit(0)").await;
    assert_eq!(exited.outcome.status, Status::Ok, "{exited:?}");
    assert_eq!(
        c.stats().await.unwrap().interpreters_live,
        1,
        "an interpreter that ended is not live"
    );
    c.close_session(&a, None).await.unwrap();
    let closed = c.stats().await.unwrap();
    assert_eq!(
        (closed.interpreters_live, closed.interpreters_memory_bytes),
        (0, 0),
        "a closed session's interpreter goes with it"
    );
    let again = run(&c, &b, "print('x' in globals())").await;
    assert_reset(&again, ResetReason::CodeExited);
    assert_eq!(c.stats().await.unwrap().interpreters_live, 1);
}

/// Starts a run of `code` and waits until it is running.
async fn started(c: &Client, sid: &str, code: &str) -> prims_protocol::client::Call {
    let mut call = c.call(RequestBody::Run(run_req(sid, code))).await.unwrap();
    while let Some(ev) = call.next_event().await.unwrap() {
        if ev == Event::Started {
            return call;
        }
    }
    panic!("the run ended before it started");
}

#[tokio::test(flavor = "multi_thread")]
async fn live_lifecycle_a_cancel_and_a_restart_replace_the_interpreter() {
    let mut d = Daemon::start(&live_policy(NO_POOL, ""));
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap().session_id;
    run(&c, &s, "x = 1").await;
    let call = started(&c, &s, "import time\ntime.sleep(60)").await;
    c.cancel(call.id()).await.unwrap();
    match call.finish().await {
        Err(ClientError::Server(e)) => assert_eq!(e.code, ErrorCode::Cancelled),
        other => panic!("{other:?}"),
    }
    let after_cancel = run(&c, &s, "print('x' in globals())\nx = 2").await;
    assert_reset(&after_cancel, ResetReason::Cancelled);
    assert_eq!(stdout(&after_cancel), "False\n");

    drop(c);
    d.crash_and_restart();
    let c = d.client().await;
    let after_restart = run(&c, &s, "print('x' in globals())").await;
    assert_reset(&after_restart, ResetReason::ServerRestarted);
    assert_eq!(stdout(&after_restart), "False\n");
    let next = run(&c, &s, "print('kept')").await;
    assert_kept(&next);
}

/// A spare runs `python.warm_up_code` while it waits: in the jail, as the
/// session's uid, before the session's first cell, and leaving nothing in
/// its globals, its history or its output.
#[tokio::test(flavor = "multi_thread")]
async fn live_lifecycle_a_spare_runs_the_warm_up_code_apart_from_the_session() {
    let warm = "import os, sys\\n\
                open('/workspace/.warmed', 'w').write(str(os.getuid()))\\n\
                print('noise')\\nprint('noise', file=sys.stderr)\\nleaked = 1";
    let d = Daemon::start_with_python(
        &live_policy("pool_size = 1", ""),
        &format!("prewarm_imports = []\nwarm_up_code = \"{warm}\""),
    );
    let c = d.client().await;
    wait_for_stats(&c, "a warm session in the pool", |s| s.pool_ready == 1).await;
    let a = c.open_session(None).await.unwrap().session_id;
    // The next spare's code raises (a reload replaces the pool's spares,
    // so the session above took its spare first).
    d.reload_raw(&std::fs::read_to_string(&d.policy).unwrap().replace(
        &format!("warm_up_code = \"{warm}\""),
        "warm_up_code = \"1 / 0\"",
    ));
    let first = run(
        &c,
        &a,
        "print('leaked' in globals(), open('/workspace/.warmed').read())\n\
         print(get_ipython().execution_count, len(In))",
    )
    .await;
    assert!(first.interpreter.warm, "{first:?}");
    assert_eq!(
        stdout(&first),
        "False 1000\n2 2\n",
        "cell one, as in any session"
    );
    assert_eq!(stderr(&first), "");

    // Code that raises costs the pool nothing: the spare still serves.
    wait_for_stats(&c, "a second warm session", |s| s.pool_ready == 1).await;
    let b = c.open_session(None).await.unwrap().session_id;
    let r = run(&c, &b, "print(2)").await;
    assert!(r.interpreter.warm, "{r:?}");
    assert_eq!(stdout(&r), "2\n");
    assert!(d.log().contains("ZeroDivisionError"), "{}", d.log());
}

#[tokio::test(flavor = "multi_thread")]
async fn live_lifecycle_the_pool_leaves_room_for_a_real_session() {
    let d = Daemon::start(&live_policy(
        "pool_size = 3",
        "max_sessions = 3\n", // appended to [sessions]
    ));
    let c = d.client().await;
    wait_for_stats(&c, "two spares", |s| s.pool_ready == 2).await;
    // A third spare would take the last place: it is never made.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert_eq!(c.stats().await.unwrap().pool_ready, 2);

    let mut warm = Vec::new();
    for _ in 0..3 {
        let sid = c.open_session(None).await.unwrap().session_id;
        warm.push(run(&c, &sid, "print(1)").await.interpreter.warm);
    }
    assert_eq!(
        warm,
        [true, true, false],
        "two from the pool, one made cold"
    );
    match c.open_session(None).await {
        Err(ClientError::Server(e)) => {
            assert_eq!(e.code, ErrorCode::Busy, "{e:?}");
            assert!(e.message.contains("max_sessions"), "{e:?}");
        }
        other => panic!("a fourth session: {other:?}"),
    }
    assert_eq!(
        c.stats().await.unwrap().pool_ready,
        0,
        "no spare at the cap"
    );
}

/// Code in a global whose unpickling leaves a mark: a restore of it runs
/// `touch /workspace/restore-ran`.
const RESTORE_MARK: &str = "import os\n\
    class Mark:\n\
    \x20   def __reduce__(self):\n\
    \x20       return (os.system, ('touch /workspace/restore-ran',))\n\
    mark = Mark()\n\
    n = 5";

/// After a stop saved the session's globals, a call with `fresh` gets a
/// clean interpreter: nothing is restored (no saved code runs again), the
/// saved state is deleted, and the call says `fresh_requested`.
async fn fresh_after_a_stop_restores_nothing(d: &Daemon, c: &Client, s: &str, why: ResetReason) {
    let state_file = d.workspace(s).join(".prims/state.pickle");
    assert!(state_file.exists(), "the stop saved the globals");
    let back = send(
        c,
        fresh(
            s,
            "import os\nprint(os.path.exists('/workspace/restore-ran'), 'n' in globals())",
        ),
    )
    .await;
    assert_reset(&back, ResetReason::FreshRequested);
    assert_eq!(stdout(&back), "False False\n", "{back:?}");
    assert!(
        back.interpreter.restored.is_empty(),
        "{:?}",
        back.interpreter
    );
    assert!(back.interpreter.not_restored.is_empty());
    assert!(
        !state_file.exists(),
        "the saved globals were deleted unread"
    );
    let next = run(c, s, "print('n' in globals())").await;
    assert_kept(&next);
    assert_eq!(stdout(&next), "False\n", "nothing is restored later either");
    assert!(!d.workspace(s).join("restore-ran").exists(), "{why:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn live_lifecycle_fresh_after_an_idle_stop_restores_nothing() {
    let d = Daemon::start(&live_policy(&format!("{NO_POOL}idle_ttl = \"1s\""), ""));
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap().session_id;
    let set = run(&c, &s, RESTORE_MARK).await;
    assert_eq!(set.outcome.status, Status::Ok, "{set:?}");
    wait_for_stats(&c, "the idle interpreter stopped", |s| {
        s.interpreters_live == 0
    })
    .await;
    wait_for_file(&d.workspace(&s).join(".prims"), "state.pickle");
    fresh_after_a_stop_restores_nothing(&d, &c, &s, ResetReason::StoppedIdle).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn live_lifecycle_fresh_after_a_stop_for_room_restores_nothing() {
    let d = Daemon::start(&live_policy(&format!("{NO_POOL}max_live = 1"), ""));
    let c = d.client().await;
    let a = c.open_session(None).await.unwrap().session_id;
    let b = c.open_session(None).await.unwrap().session_id;
    run(&c, &a, RESTORE_MARK).await;
    run(&c, &b, "b = 2").await;
    wait_for_file(&d.workspace(&a).join(".prims"), "state.pickle");
    fresh_after_a_stop_restores_nothing(&d, &c, &a, ResetReason::StoppedForRoom).await;
    // Without `fresh`, the same state comes back (and its code runs, in
    // the session's own jail).
    run(&c, &b, RESTORE_MARK).await;
    run(&c, &a, "a = 1").await;
    let back_b = run(
        &c,
        &b,
        "import os\nprint(n, os.path.exists('/workspace/restore-ran'))",
    )
    .await;
    assert_reset(&back_b, ResetReason::StoppedForRoom);
    assert_eq!(stdout(&back_b), "5 True\n");
}

/// A global whose pickling takes 30 s.
const SLOW_SAVE: &str = "import time\n\
    class Slow:\n\
    \x20   def __reduce__(self):\n\
    \x20       time.sleep(30)\n\
    \x20       return (int, (1,))\n\
    slow = Slow()\n\
    n = 5";

#[tokio::test(flavor = "multi_thread")]
async fn live_lifecycle_a_slow_save_holds_up_no_other_session_and_loses_only_its_own_state() {
    let d = Daemon::start(&live_policy(
        &format!("{NO_POOL}max_live = 1\nsave_timeout = \"1s\""),
        "",
    ));
    let c = d.client().await;
    let a = c.open_session(None).await.unwrap().session_id;
    let b = c.open_session(None).await.unwrap().session_id;
    run(&c, &a, SLOW_SAVE).await;
    // b's first call stops a's interpreter for room; a's save runs the
    // slow pickling, and b does not wait for it.
    let t = std::time::Instant::now();
    let in_b = run(&c, &b, "print('b runs')").await;
    let waited = t.elapsed();
    assert_eq!(stdout(&in_b), "b runs\n");
    assert!(
        waited < std::time::Duration::from_secs(15),
        "another session's first call waited {waited:?} for a save"
    );
    let back = run(&c, &a, "print('n' in globals())").await;
    assert_reset(&back, ResetReason::StoppedForRoom);
    assert_eq!(stdout(&back), "False\n");
    assert_eq!(
        back.interpreter.not_restored,
        [NotRestored {
            name: "*".into(),
            why: "no global was kept: saving them at the stop took longer than \
                  interpreters.save_timeout (no answer within 1 s)"
                .into(),
        }],
        "the reason is given"
    );
    let again = run(&c, &a, "print('works')").await;
    assert_kept(&again);
}

#[tokio::test(flavor = "multi_thread")]
async fn live_lifecycle_idle_saves_run_side_by_side_and_no_call_waits_for_them() {
    let d = Daemon::start(&live_policy(
        &format!("{NO_POOL}idle_ttl = \"1s\"\nsave_timeout = \"5s\""),
        "",
    ));
    let c = d.client().await;
    let mut slow = Vec::new();
    for _ in 0..2 {
        let s = c.open_session(None).await.unwrap().session_id;
        run(&c, &s, SLOW_SAVE).await;
        slow.push(s);
    }
    let other = c.open_session(None).await.unwrap().session_id;
    // Both slow sessions stop while idle; their saves hang for 5 s each.
    wait_for_stats(&c, "the slow interpreters stopping", |s| {
        s.interpreters_live == 0
    })
    .await;
    let t = std::time::Instant::now();
    let quick = run(&c, &other, "print('quick')").await;
    assert_eq!(stdout(&quick), "quick\n");
    assert!(
        t.elapsed() < std::time::Duration::from_secs(4),
        "a new session's first call waited {:?} while saves ran",
        t.elapsed()
    );
    // Each slow session's next call waits for its own save only: both
    // saves ran at once, so both are lost within one deadline and a bit.
    let t = std::time::Instant::now();
    for s in &slow {
        let back = run(&c, s, "print('n' in globals())").await;
        assert_reset(&back, ResetReason::StoppedIdle);
        assert_eq!(
            back.interpreter.not_restored.len(),
            1,
            "{:?}",
            back.interpreter
        );
        assert!(back.interpreter.not_restored[0]
            .why
            .contains("interpreters.save_timeout"));
    }
    assert!(
        t.elapsed() < std::time::Duration::from_secs(9),
        "the saves ran one after the other: {:?}",
        t.elapsed()
    );
}
