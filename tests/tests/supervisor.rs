//! The supervisor daemon through its socket, with real jails: streaming,
//! concurrency, the queue, sessions (persistence, isolation, restart, quota,
//! expiry), cancellation, and file operations under symlink attacks.

use prims_protocol::client::{Call, Client, ClientError};
use prims_protocol::jail::Status;
use prims_protocol::wire::{ErrorCode, Event, OutputStream, Reply, RequestBody, RunReply};
use prims_tests::daemon::{run_req, Daemon};
use prims_tests::{processes_with_marker, unique};
use std::time::{Duration, Instant};

async fn run(c: &Client, session_id: &str, code: &str) -> RunReply {
    c.run(run_req(session_id, code), |_| {})
        .await
        .unwrap_or_else(|e| panic!("run failed: {e}"))
}

/// Start a run of `code` and wait until its jail has started.
async fn started(c: &Client, session_id: &str, code: &str) -> Call {
    let mut call = c
        .call(RequestBody::Run(run_req(session_id, code)))
        .await
        .unwrap();
    loop {
        match call.next_event().await.unwrap() {
            Some(Event::Started) => return call,
            Some(_) => {}
            None => panic!("the run ended before its jail started"),
        }
    }
}

/// Wait until a process whose command line holds `marker` runs on the host.
fn wait_for_marker(marker: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while processes_with_marker(marker).is_empty() {
        assert!(
            Instant::now() < deadline,
            "no process with {marker} appeared"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn server_error<T: std::fmt::Debug>(r: Result<T, ClientError>) -> prims_protocol::wire::ErrorReply {
    match r {
        Err(ClientError::Server(e)) => e,
        other => panic!("expected a server error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn supervisor_runs_code_and_streams_output() {
    let d = Daemon::start("");
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap();
    let mut streamed = Vec::new();
    let mut started = false;
    let reply = c
        .run(
            run_req(
                &s.session_id,
                "import sys\nprint('out')\nprint('err', file=sys.stderr)\nopen('output/a.txt','w').write('hi')",
            ),
            |ev| match ev {
                Event::Started => started = true,
                Event::Output { stream: OutputStream::Stdout, data } => streamed.extend(data),
                _ => {}
            },
        )
        .await
        .unwrap();
    assert!(started, "a Started event came before the reply");
    assert_eq!(reply.outcome.status, Status::Ok, "{reply:?}");
    assert_eq!(text(&reply.stdout), "out\n");
    assert_eq!(text(&reply.stderr), "err\n");
    assert_eq!(text(&streamed), "out\n", "stdout was streamed as events");
    assert_eq!(reply.files.len(), 1, "{:?}", reply.files);
    assert_eq!(reply.files[0].path, "a.txt");
    assert_eq!(reply.files[0].size, 2);
    assert!(reply.files[0].changed);
    assert_eq!(reply.files[0].mime, "text/plain");
}

#[tokio::test(flavor = "multi_thread")]
async fn supervisor_40_runs_across_8_sessions_stay_unmixed() {
    let d = Daemon::start("");
    let c = d.client().await;
    let mut sessions = Vec::new();
    for _ in 0..8 {
        sessions.push(c.open_session(None).await.unwrap().session_id);
    }
    let mut calls = Vec::new();
    for (si, sid) in sessions.iter().enumerate() {
        for r in 0..5 {
            let (c, sid) = (c.clone(), sid.clone());
            calls.push(tokio::spawn(async move {
                let code = format!("for i in range(200):\n    print('s{si}-r{r}-', i)");
                let reply = run(&c, &sid, &code).await;
                (si, r, reply)
            }));
        }
    }
    for call in calls {
        let (si, r, reply) = call.await.unwrap();
        let want: String = (0..200).map(|i| format!("s{si}-r{r}- {i}\n")).collect();
        assert_eq!(reply.outcome.status, Status::Ok, "{reply:?}");
        assert_eq!(
            text(&reply.stdout),
            want,
            "session {si} run {r} got mixed output"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn supervisor_queue_overflow_is_busy() {
    let d = Daemon::start("[limits]\nmax_concurrent_runs = 1\nmax_queued_runs = 1\n");
    let c = d.client().await;
    let (a, b, e) = (
        c.open_session(None).await.unwrap(),
        c.open_session(None).await.unwrap(),
        c.open_session(None).await.unwrap(),
    );
    let slow = "import time\ntime.sleep(3)";
    // The first run holds the only slot.
    let first = started(&c, &a.session_id, slow).await;
    let mut second = c
        .call(RequestBody::Run(run_req(&b.session_id, slow)))
        .await
        .unwrap();
    assert_eq!(
        second.next_event().await.unwrap(),
        Some(Event::Queued { position: 1 }),
        "the second run waits in the queue"
    );
    let t = Instant::now();
    let third = c.run(run_req(&e.session_id, "pass"), |_| {}).await;
    let err = server_error(third);
    assert_eq!(err.code, ErrorCode::Busy, "{err:?}");
    assert!(err.message.contains("retry"), "{}", err.message);
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "busy is immediate, not a hang"
    );
    assert!(matches!(first.finish().await, Ok(Reply::Run(_))));
    assert!(matches!(second.finish().await, Ok(Reply::Run(_))));
}

#[tokio::test(flavor = "multi_thread")]
async fn supervisor_fresh_runs_yield_to_session_calls() {
    let d = Daemon::start(
        "[limits]\nmax_concurrent_runs = 1\nmax_concurrent_fresh_runs = 1\nmax_queued_runs = 4\n",
    );
    let c = d.client().await;
    let (a, b, e) = (
        c.open_session(None).await.unwrap().session_id,
        c.open_session(None).await.unwrap().session_id,
        c.open_session(None).await.unwrap().session_id,
    );
    assert_eq!(run(&c, &b, "x = 1").await.outcome.status, Status::Ok);
    // A fresh run holds the only batch slot until the test lets it go.
    let hold = "import os, time\nwhile not os.path.exists('/workspace/go'):\n    time.sleep(0.02)";
    let fresh = |sid: &str| prims_protocol::wire::RunRequest {
        fresh: true,
        ..run_req(sid, hold)
    };
    let mut first = c.call(RequestBody::Run(fresh(&a))).await.unwrap();
    while first.next_event().await.unwrap() != Some(Event::Started) {}
    assert_eq!(d.wait_for_batch_jobs(1), 1, "{:?}", d.job_cpu_shares());
    // A session's call takes a slot of its own: no queue, while the fresh
    // run still waits for the file.
    let mut events = Vec::new();
    let call = c
        .run(run_req(&b, "print(x + 1)"), |ev| events.push(ev))
        .await
        .unwrap();
    assert_eq!(text(&call.stdout), "2\n", "{call:?}");
    assert!(
        !events.iter().any(|ev| matches!(ev, Event::Queued { .. })),
        "the session's call queued behind a fresh run: {events:?}"
    );
    // Another fresh run waits for the batch slot.
    let mut second = c.call(RequestBody::Run(fresh(&e))).await.unwrap();
    assert_eq!(
        second.next_event().await.unwrap(),
        Some(Event::Queued { position: 1 })
    );
    for sid in [&a, &e] {
        std::fs::write(d.workspace(sid).join("go"), "").unwrap();
    }
    for call in [first, second] {
        match call.finish().await {
            Ok(Reply::Run(r)) => assert_eq!(r.outcome.status, Status::Ok, "{r:?}"),
            other => panic!("{other:?}"),
        }
    }
    // The fresh interpreter goes on as the session's: at normal weight.
    assert_eq!(text(&run(&c, &a, "print(3)").await.stdout), "3\n");
    assert_eq!(text(&run(&c, &e, "print(4)").await.stdout), "4\n");
    let shares = d.job_cpu_shares();
    assert!(
        !shares.values().any(|v| v == "102"),
        "still at batch weight: {shares:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn supervisor_sessions_persist_and_are_isolated() {
    let d = Daemon::start("");
    let c = d.client().await;
    let (a, b) = (
        c.open_session(None).await.unwrap(),
        c.open_session(None).await.unwrap(),
    );
    let w = run(
        &c,
        &a.session_id,
        "open('output/keep.txt','w').write('kept')",
    )
    .await;
    assert_eq!(w.outcome.status, Status::Ok, "{w:?}");
    let again = run(&c, &a.session_id, "print(open('output/keep.txt').read())").await;
    assert_eq!(
        text(&again.stdout),
        "kept\n",
        "files persist across runs of a session"
    );
    let other = run(
        &c,
        &b.session_id,
        "import os\nprint(os.listdir('output'))\ntry:\n    open('/workspace/output/keep.txt')\nexcept OSError as e:\n    print(e.errno)",
    )
    .await;
    assert_eq!(
        text(&other.stdout),
        "[]\n2\n",
        "another session sees nothing of it"
    );
    let uid = |ws: &std::path::Path| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(ws.join("output")).unwrap().uid()
    };
    assert_ne!(
        uid(&d.workspace(&a.session_id)),
        uid(&d.workspace(&b.session_id)),
        "each session's files belong to its own host uid"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn supervisor_restart_keeps_sessions_and_reports_lost_runs() {
    let mut d = Daemon::start("");
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap();
    run(
        &c,
        &s.session_id,
        "open('output/x.txt','w').write('survives')",
    )
    .await;
    // A run in flight when the daemon dies.
    let marker = unique("lost");
    let sleep = format!("import time\ntime.sleep(30)  # {marker}");
    let call = started(&c, &s.session_id, &sleep).await;
    d.crash_and_restart();
    assert!(
        matches!(call.finish().await, Err(ClientError::Disconnected)),
        "the client learns that its run failed"
    );
    let c = d.client().await;
    let info = c.session_info(&s.session_id, None).await.unwrap();
    assert!(info.last_run_lost, "the lost run is on record: {info:?}");
    let r = run(&c, &s.session_id, "print(open('output/x.txt').read())").await;
    assert_eq!(text(&r.stdout), "survives\n");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !processes_with_marker(&marker).is_empty() {
        assert!(Instant::now() < deadline, "the lost run's jail still runs");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn supervisor_cancel_kills_the_jail_within_a_second() {
    let d = Daemon::start("");
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap();
    let marker = unique("cancel");
    // The code runs in the session's interpreter, whose command line is the
    // agent's: a detached child carries the marker in its own.
    let code = format!(
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    os.execv('/bin/sh', ['sh', '-c', 'sleep 60 # {marker}'])\ntime.sleep(60)"
    );
    let call = started(&c, &s.session_id, &code).await;
    wait_for_marker(&marker);
    let t = Instant::now();
    c.cancel(call.id()).await.unwrap();
    let err = match call.finish().await {
        Err(ClientError::Server(e)) => e,
        other => panic!("{other:?}"),
    };
    assert_eq!(err.code, ErrorCode::Cancelled);
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "took {:?}",
        t.elapsed()
    );
    assert!(
        processes_with_marker(&marker).is_empty(),
        "nothing of the run survives"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn supervisor_client_disconnect_cancels_its_runs() {
    let d = Daemon::start("");
    let marker = unique("disc");
    {
        let c = d.client().await;
        let s = c.open_session(None).await.unwrap();
        let sleep = format!(
            "import subprocess, time\nsubprocess.Popen(['sh', '-c', 'sleep 60 # {marker}'])\ntime.sleep(60)"
        );
        let _call = started(&c, &s.session_id, &sleep).await;
        wait_for_marker(&marker);
        // The connection goes first: the call, dropped after it, has no
        // connection left to send a cancel on, so only the disconnect can
        // stop the run.
        drop(c);
    }
    let deadline = Instant::now() + Duration::from_secs(3);
    while !processes_with_marker(&marker).is_empty() {
        assert!(Instant::now() < deadline, "the run outlived its client");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn supervisor_file_operations_refuse_symlink_and_dotdot_attacks() {
    let d = Daemon::start("");
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap();
    let sid = s.session_id.clone();
    let plant = run(
        &c,
        &sid,
        "import os\nos.symlink('/etc/shadow', 'output/x')\nos.symlink('/', 'output/up')\nopen('output/ok.txt','w').write('fine')",
    )
    .await;
    assert_eq!(plant.outcome.status, Status::Ok, "{plant:?}");
    let names: Vec<_> = plant.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(names, ["ok.txt"], "artifacts never include planted links");
    let read = |path: &'static str| c.read_file(&sid, None, path, 0, 4096);
    for path in [
        "output/x",
        "output/up/etc/shadow",
        "../../../etc/shadow",
        "/etc/shadow",
        "output/../../x",
    ] {
        let err = server_error(read(path).await);
        assert!(
            matches!(
                err.code,
                ErrorCode::Forbidden | ErrorCode::NotFound | ErrorCode::BadRequest
            ),
            "{path}: {err:?}"
        );
    }
    assert_eq!(read("output/ok.txt").await.unwrap().data, b"fine");
    let list = c.list_dir(&sid, None, "output/up").await;
    assert!(
        list.is_err(),
        "listing through a link to / is refused: {list:?}"
    );
    let next = run(&c, &sid, "print('still fine')").await;
    assert_eq!(text(&next.stdout), "still fine\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn supervisor_disk_quota_gives_enospc() {
    let d = Daemon::start("[sessions]\ndisk_quota = \"16MiB\"\n");
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap();
    let r = run(
        &c,
        &s.session_id,
        "try:\n    with open('output/big', 'wb') as f:\n        for _ in range(32):\n            f.write(b'x' * (1 << 20))\n    print('no limit')\nexcept OSError as e:\n    print(e.errno)",
    )
    .await;
    assert_eq!(text(&r.stdout), "28\n", "ENOSPC at the quota: {r:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn supervisor_idle_sessions_expire() {
    let d = Daemon::start("[sessions]\nidle_ttl = \"2s\"\n");
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let r = c.session_info(&s.session_id, None).await;
        if let Err(ClientError::Server(e)) = &r {
            assert_eq!(e.code, ErrorCode::NotFound);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the idle session never expired: {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // Closed to callers first; its interpreter ends, then its files go.
    while d.workspace(&s.session_id).exists() {
        assert!(Instant::now() < deadline, "its workspace is never removed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn supervisor_mounts_are_read_only_in_the_jail() {
    let d = Daemon::start("");
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap();
    let m = c
        .write_mount(&s.session_id, "data.csv", b"a,b\n1,2\n")
        .await
        .unwrap();
    assert_eq!(m.bytes, 8);
    let r = run(
        &c,
        &s.session_id,
        "import os\nprint(open('mounts/data.csv').read().splitlines()[1])\n\
         for attempt in (lambda: open('mounts/data.csv', 'a'), lambda: open('mounts/new', 'w'),\n\
                         lambda: os.chmod('mounts/data.csv', 0o666), lambda: os.remove('mounts/data.csv')):\n\
         \x20   try:\n        attempt()\n        print('allowed')\n    except OSError as e:\n        print(e.errno)",
    )
    .await;
    // The file is 0444 (EACCES); the mount itself refuses every change (EROFS).
    assert_eq!(text(&r.stdout), "1,2\n13\n30\n30\n30\n", "{r:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn supervisor_policy_reload_applies_to_new_runs_and_refuses_bad_files() {
    let d = Daemon::start("[limits]\nwall_time = \"20s\"\n");
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap();
    let sleepy = "import time\ntime.sleep(2)\nprint('done')";
    assert_eq!(
        run(&c, &s.session_id, sleepy).await.outcome.status,
        Status::Ok
    );

    d.reload_and_wait("[limits]\nwall_time = \"1s\"\n", Duration::from_secs(10));
    let cut = run(&c, &s.session_id, sleepy).await;
    assert_eq!(
        cut.outcome.status,
        Status::Timeout,
        "the new limit applies: {cut:?}"
    );

    d.reload_raw("[limits]\nwall_time = \"banana\"\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !d.log().contains("policy reload refused") {
        assert!(Instant::now() < deadline, "no refusal:\n{}", d.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        d.log().contains("limits.wall_time"),
        "the error names the key:\n{}",
        d.log()
    );
    let still = run(&c, &s.session_id, sleepy).await;
    assert_eq!(
        still.outcome.status,
        Status::Timeout,
        "the old policy stays in force: {still:?}"
    );
}
