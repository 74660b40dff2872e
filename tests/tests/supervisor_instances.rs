//! Two supervisors of one host on one cgroup parent (each with its own
//! state directory): each names its job cgroups after its own instance,
//! and the start-up clean-up of one, after a crash too, removes its own
//! leftovers and never the other's running jobs, nor job cgroups an
//! earlier version named, whose owner cannot be told.

use prims_protocol::client::{Call, Client, ClientError};
use prims_protocol::jail::Status;
use prims_protocol::wire::{Event, Reply, RequestBody, RunReply};
use prims_tests::daemon::{run_req, Daemon};
use prims_tests::live::*;
use prims_tests::{processes_with_marker, unique};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// Starts a run of `code` and waits until it is running.
async fn started(c: &Client, sid: &str, code: &str) -> Call {
    let mut call = c.call(RequestBody::Run(run_req(sid, code))).await.unwrap();
    while let Some(ev) = call.next_event().await.unwrap() {
        if ev == Event::Started {
            return call;
        }
    }
    panic!("the run ended before it started");
}

/// The reply of a run started with [`started`].
async fn finished(call: Call) -> RunReply {
    match call.finish().await {
        Ok(Reply::Run(r)) => r,
        other => panic!("the run did not end normally: {other:?}"),
    }
}

fn wait_gone(marker: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !processes_with_marker(marker).is_empty() {
        assert!(
            Instant::now() < deadline,
            "a process with {marker} still runs"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_supervisor_on_the_parent_leaves_the_first_ones_jobs_running() {
    let a = Daemon::start(&live_policy(NO_POOL, ""));
    let ca = a.client().await;
    let s = ca.open_session(None).await.unwrap().session_id;
    run(&ca, &s, "x = 41").await;
    let call = started(&ca, &s, "import time\ntime.sleep(5)\nx += 1\nprint(x)").await;
    // Only A runs on the parent yet: every job cgroup there is A's.
    let before = a.job_cgroups();
    assert!(!before.is_empty(), "A's interpreter has a job cgroup");

    // B's start-up clean-up is over once it listens.
    let b = Daemon::start_beside(&live_policy(NO_POOL, ""), &a);
    let after = a.job_cgroups();
    assert!(
        before.is_subset(&after),
        "B's start-up removed A's job cgroups {:?} (left: {after:?})\nB's log:\n{}",
        before.difference(&after).collect::<Vec<_>>(),
        b.log()
    );

    let reply = finished(call).await;
    assert_eq!(reply.outcome.status, Status::Ok, "{reply:?}");
    assert_eq!(stdout(&reply), "42\n");
    assert_kept(&reply);
    let again = run(&ca, &s, "print(x)").await;
    assert_eq!(stdout(&again), "42\n");
    assert_kept(&again);

    // B runs beside A, under names of its own.
    let cb = b.client().await;
    let sb = cb.open_session(None).await.unwrap().session_id;
    let ran = run(&cb, &sb, "print('b')").await;
    assert_eq!(stdout(&ran), "b\n", "{ran:?}");
    let b_jobs: BTreeSet<String> = b.job_cgroups().difference(&before).cloned().collect();
    assert!(
        !b_jobs.is_empty(),
        "B's interpreter has a job cgroup of its own"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restarted_supervisor_removes_its_own_leftovers_and_no_one_elses() {
    let mut a = Daemon::start(&live_policy(NO_POOL, ""));
    let b = Daemon::start_beside(&live_policy(NO_POOL, ""), &a);
    let (ca, cb) = (a.client().await, b.client().await);

    // B: a state, and a cell that runs through A's crash and restart.
    let sb = cb.open_session(None).await.unwrap().session_id;
    run(&cb, &sb, "y = 1").await;
    let b_call = started(&cb, &sb, "import time\ntime.sleep(8)\ny += 1\nprint(y)").await;
    // B's job cgroups, its template's and its interpreter's; A's template
    // has one too by now, under A's own names.
    let b_prefix = b.job_prefix();
    let b_jobs: BTreeSet<String> = b
        .job_cgroups()
        .into_iter()
        .filter(|j| j.starts_with(&b_prefix))
        .collect();
    assert!(!b_jobs.is_empty(), "B's interpreter has a job cgroup");

    // A: a jail that outlives A (its cell sleeps on), with a process whose
    // command line the host can find (a shell that does not exec its last
    // command away).
    let marker = unique("leftover");
    let sa = ca.open_session(None).await.unwrap().session_id;
    let code = format!(
        "import subprocess, time\n\
         subprocess.Popen(['/bin/sh', '-c', 'sleep 60; true # {marker}'])\n\
         time.sleep(60)"
    );
    let a_call = started(&ca, &sa, &code).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while processes_with_marker(&marker).is_empty() {
        assert!(Instant::now() < deadline, "no process with {marker}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let a_jobs: BTreeSet<String> = a.job_cgroups().difference(&b_jobs).cloned().collect();
    let jail_job = processes_with_marker(&marker)
        .iter()
        .find_map(|(pid, _)| job_of(*pid))
        .expect("the marked process is in a job cgroup");
    assert!(
        a_jobs.contains(&jail_job),
        "A's interpreter's job cgroup {jail_job} is among A's {a_jobs:?}"
    );

    // kill -9 with the client still connected: a client that hangs up
    // first has its run cancelled, and the jail goes with it. (A's
    // template, whose channel was A, ends with it.)
    a.kill();
    let left = a.job_cgroups();
    assert!(
        left.contains(&jail_job) && !processes_with_marker(&marker).is_empty(),
        "pairing: A's jail outlives A's kill -9, its cgroup {jail_job} left behind \
         (there: {left:?}, processes: {:?})",
        processes_with_marker(&marker)
    );
    assert!(
        matches!(a_call.finish().await, Err(ClientError::Disconnected)),
        "A's client learns that its run failed"
    );

    // A job cgroup as an earlier version named them (eight characters of
    // a session's name, a count): whose it is cannot be told, so it stays,
    // and the log says where it is.
    let old_style = "job-0a1b2c3d-i7";
    let old_dirs: Vec<_> = a
        .cgroup_parent_dirs()
        .iter()
        .map(|d| d.join(old_style))
        .collect();
    for d in &old_dirs {
        if let Err(e) = std::fs::create_dir(d) {
            assert_eq!(
                e.kind(),
                std::io::ErrorKind::AlreadyExists,
                "{}: {e}",
                d.display()
            );
        }
    }

    drop(ca);
    a.crash_and_restart();
    let now = a.job_cgroups();
    assert!(
        a_jobs.is_disjoint(&now),
        "A's restart removed its leftovers {a_jobs:?} (left: {now:?})\nA's log:\n{}",
        a.log()
    );
    wait_gone(&marker);
    assert!(
        b_jobs.is_subset(&now),
        "A's restart removed B's job cgroups {:?} (left: {now:?})\nA's log:\n{}",
        b_jobs.difference(&now).collect::<Vec<_>>(),
        a.log()
    );
    assert!(
        now.contains(old_style),
        "the old-style job cgroup stays: {now:?}"
    );
    let log = a.log();
    let warned = log
        .lines()
        .find(|l| l.contains("earlier version") && l.contains(old_style))
        .unwrap_or_else(|| panic!("no warning names {old_style}:\n{log}"));
    assert!(
        old_dirs
            .iter()
            .any(|d| warned.contains(&d.display().to_string())),
        "the warning gives its path: {warned}"
    );

    let b_reply = finished(b_call).await;
    assert_eq!(b_reply.outcome.status, Status::Ok, "{b_reply:?}");
    assert_eq!(stdout(&b_reply), "2\n");
    assert_kept(&b_reply);

    // A serves again, on a new interpreter.
    let ca = a.client().await;
    let back = run(&ca, &sa, "print('back')").await;
    assert_eq!(stdout(&back), "back\n", "{back:?}");
}

/// The job cgroup (`job-…`) that holds process `pid`, from its
/// `/proc/<pid>/cgroup`.
fn job_of(pid: i32) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    text.lines()
        .flat_map(|l| l.rsplit(':').next().unwrap_or("").split('/'))
        .find(|c| c.starts_with("job-"))
        .map(str::to_owned)
}
