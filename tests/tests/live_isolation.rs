//! Two sessions on one supervisor, each with its live interpreter: nothing
//! one leaves behind (a variable, a monkey-patched module, a file in
//! `/tmp`, a running thread, a child process) is visible in the other.
//! Every check first shows the thing is there in the session that made it.

use prims_protocol::client::Client;
use prims_protocol::jail::Status;
use prims_tests::daemon::Daemon;
use prims_tests::live::*;
use prims_tests::{processes_with_marker, unique};

/// A supervisor (with its warm pool, so A and B may be pooled sessions)
/// and two sessions on it.
async fn two_sessions() -> (Daemon, Client, String, String) {
    let d = Daemon::start(&live_policy("pool_size = 2", ""));
    let c = d.client().await;
    let a = c.open_session(None).await.unwrap().session_id;
    let b = c.open_session(None).await.unwrap().session_id;
    (d, c, a, b)
}

#[tokio::test(flavor = "multi_thread")]
async fn live_isolation_a_variable() {
    let (_d, c, a, b) = two_sessions().await;
    run(&c, &a, "secret = 'only in A'").await;
    run(&c, &b, "x = 1").await;
    let in_a = run(&c, &a, "secret").await;
    assert_eq!(in_a.interpreter.result.as_deref(), Some("'only in A'"));
    let in_b = run(&c, &b, "secret").await;
    assert_kept(&in_b);
    assert_eq!(in_b.outcome.status, Status::Error);
    assert_stderr_ends_with(&in_b, "NameError: name 'secret' is not defined\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn live_isolation_a_monkey_patched_module() {
    let (_d, c, a, b) = two_sessions().await;
    let patch = run(
        &c,
        &a,
        "import json, os\n\
         json.dumps = lambda *a, **k: 'X'\n\
         os.getcwd = lambda: '/patched'\n\
         print(json.dumps([1]), os.getcwd())",
    )
    .await;
    assert_eq!(stdout(&patch), "X /patched\n", "{patch:?}");
    let probe = "import json, os\nprint(json.dumps([1]), os.getcwd())";
    let other = run(&c, &b, probe).await;
    assert_eq!(other.outcome.status, Status::Ok, "{other:?}");
    assert_eq!(stdout(&other), "[1] /workspace\n", "B's modules are intact");
    // The patch is A's own state, and stays: a notebook user may patch a
    // module the agent also uses.
    let still = run(&c, &a, probe).await;
    assert_kept(&still);
    assert_eq!(stdout(&still), "X /patched\n", "the patch lives on in A");
}

#[tokio::test(flavor = "multi_thread")]
async fn live_isolation_a_file_in_tmp() {
    let (_d, c, a, b) = two_sessions().await;
    run(
        &c,
        &a,
        "open('/tmp/a-secret.txt', 'w').write('A')\nprint(open('/tmp/a-secret.txt').read())",
    )
    .await;
    let kept = run(&c, &a, "import os\nprint(sorted(os.listdir('/tmp')))").await;
    // `.prims` holds IPython's profile, which every jail's /tmp has.
    assert_eq!(
        stdout(&kept),
        "['.prims', 'a-secret.txt']\n",
        "A's /tmp lives on"
    );
    let other = run(
        &c,
        &b,
        "import os\nprint(sorted(os.listdir('/tmp')), os.path.exists('/tmp/a-secret.txt'))",
    )
    .await;
    assert_eq!(stdout(&other), "['.prims'] False\n");
}

/// POSIX shared memory and semaphores live in `/dev/shm`, a tmpfs of each
/// jail's own: B sees none of A's, not even by name.
#[tokio::test(flavor = "multi_thread")]
async fn live_isolation_shared_memory_and_semaphores() {
    let (_d, c, a, b) = two_sessions().await;
    let made = run(
        &c,
        &a,
        "import os, multiprocessing.shared_memory as sm\n\
         block = sm.SharedMemory(name='a-block', create=True, size=4096)\n\
         block.buf[:5] = b'A-mem'\nopen('/dev/shm/a-file', 'w').write('A')\n\
         print(sorted(os.listdir('/dev/shm')))",
    )
    .await;
    assert_eq!(stdout(&made), "['a-block', 'a-file']\n");
    let other = run(
        &c,
        &b,
        "import os, multiprocessing.shared_memory as sm\n\
         try:\n    sm.SharedMemory(name='a-block')\n    print('opened')\n\
         except FileNotFoundError:\n    print('absent')\n\
         print(sorted(os.listdir('/dev/shm')))",
    )
    .await;
    assert_eq!(stdout(&other), "absent\n[]\n");
    let kept = run(&c, &a, "print(bytes(block.buf[:5]))").await;
    assert_eq!(stdout(&kept), "b'A-mem'\n", "A's block lives on");
}

#[tokio::test(flavor = "multi_thread")]
async fn live_isolation_a_thread_left_running() {
    let (_d, c, a, b) = two_sessions().await;
    run(
        &c,
        &a,
        "import threading, time\n\
         threading.Thread(target=time.sleep, args=(300,), name='left-in-A', daemon=True).start()",
    )
    .await;
    let probe = "import os, threading\n\
                 print(sorted(t.name for t in threading.enumerate()))\n\
                 print(len(os.listdir('/proc/self/task')))";
    let in_a = run(&c, &a, probe).await;
    assert_eq!(
        stdout(&in_a),
        "['MainThread', 'left-in-A']\n2\n",
        "the thread runs on in A"
    );
    let in_b = run(&c, &b, &format!("{probe}\n{JAIL_PIDS}")).await;
    assert_eq!(stdout(&in_b), "['MainThread']\n1\n1 2\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn live_isolation_a_child_process() {
    let (_d, c, a, b) = two_sessions().await;
    let marker = unique("child");
    let started = run(
        &c,
        &a,
        &format!(
            "import subprocess, sys\n\
             child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', '{marker}'])\n\
             print(child.pid)"
        ),
    )
    .await;
    let child_pid: i32 = stdout(&started).trim().parse().expect("a pid");
    let in_a = run(&c, &a, JAIL_PIDS).await;
    assert_eq!(
        stdout(&in_a),
        format!("1 2 {child_pid}\n"),
        "A's child runs on"
    );
    let host = processes_with_marker(&marker);
    assert_eq!(host.len(), 1, "{host:?}");
    let host_pid = host[0].0;

    // B sees only its own init and python, and can signal neither A's
    // child's pid in A's namespace nor its pid on the host.
    let in_b = run(
        &c,
        &b,
        &format!(
            "{JAIL_PIDS}\n\
             import errno, os\n\
             for pid in ({child_pid}, {host_pid}):\n\
             \x20   try:\n\
             \x20       os.kill(pid, 0)\n\
             \x20       print('reached', pid)\n\
             \x20   except OSError as e:\n\
             \x20       print(errno.errorcode[e.errno])"
        ),
    )
    .await;
    assert_eq!(stdout(&in_b), "1 2\nESRCH\nESRCH\n", "{in_b:?}");
    assert_eq!(
        processes_with_marker(&marker).len(),
        1,
        "A's child is untouched"
    );
}
