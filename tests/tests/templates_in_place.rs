//! `fresh: true` in a forked interpreter: a fresh python forked in place,
//! in the same jail, by python's parent outside it. Through a real
//! supervisor, on the real jail: the new python is confined as the old
//! was, nothing the old one left survives (state, processes, `/tmp`, System
//! V objects), it answers interrupts, and where it cannot be had the call
//! gets a new interpreter as before.

use prims_protocol::client::Client;
use prims_protocol::wire::RunRequest;
use prims_protocol::wire::{ResetReason, Stats};
use prims_tests::daemon::Daemon;
use prims_tests::forked::{
    clean, forked_session, forked_session_with, numpy_templates_daemon, templates_policy as policy,
    with_numpy, FORKED,
};
use prims_tests::live::*;

async fn stats(c: &Client) -> Stats {
    c.stats().await.unwrap()
}

/// What a python can see of its pid namespace and signal in it, but
/// itself.
const NEIGHBOURS: &str = r#"
import os
me = os.getpid()
print('pids', sorted(int(p) for p in os.listdir('/proc') if p.isdigit() and int(p) != me))
alive = []
for pid in range(2, 1 << 16):
    if pid == me:
        continue
    try:
        os.kill(pid, 0)
        alive.append(pid)
    except ProcessLookupError:
        pass
print('signalable', alive)
"#;

#[tokio::test(flavor = "multi_thread")]
async fn in_place_a_fresh_python_leaves_nothing_of_the_old_and_is_confined_as_it() {
    let d = Daemon::start(&policy());
    let c = d.client().await;
    let s = forked_session(&d, &c).await;
    assert_eq!(clean(&run(&c, &s, CONFINEMENT).await), CONFINED);
    // State, a process that outlives the cell, files in /tmp (one in a
    // directory it may not even list), and its random state.
    let leave = "import os, random, subprocess, sys\nx = 1\n\
                 subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], start_new_session=True)\n\
                 os.makedirs('/tmp/d/e')\nopen('/tmp/d/e/f', 'w').close()\nopen('/tmp/g', 'w').close()\n\
                 os.chmod('/tmp/d', 0)\n\
                 import multiprocessing, multiprocessing.shared_memory as sm\n\
                 held = (multiprocessing.Lock(), sm.SharedMemory(create=True, size=4096))\n\
                 open('/dev/shm/h', 'w').close()\n\
                 print(os.getpid(), random.random())";
    let old = clean(&run(&c, &s, leave).await);
    let before = stats(&c).await;

    let r = send(&c, fresh(&s, "import os, random\nprint('x' in globals(), os.getpid(), random.random(), os.listdir('/tmp'), os.listdir('/dev/shm'))")).await;
    assert_reset(&r, ResetReason::FreshRequested);
    let new = clean(&r);
    let after = stats(&c).await;
    assert_eq!(
        after.starts_in_place,
        before.starts_in_place + 1,
        "{after:?}"
    );
    assert_eq!(
        after.starts_forked, before.starts_forked,
        "no new fork: {after:?}"
    );
    let (old, new): (Vec<&str>, Vec<&str>) = (
        old.split_whitespace().collect(),
        new.split_whitespace().collect(),
    );
    assert_eq!(new[0], "False", "the old globals: {new:?}");
    assert_ne!(old[0], new[1], "the same python: {old:?} {new:?}");
    assert_ne!(old[1], new[2], "the same random state: {old:?} {new:?}");
    // Emptied, but for IPython's profile, as a new jail's /tmp has it; and
    // /dev/shm (the old one's shared memory and its file) as a new jail's.
    assert_eq!(new[3], "['.prims']", "/tmp: {new:?}");
    assert_eq!(new[4], "[]", "/dev/shm: {new:?}");
    // Only the jail's init is left beside it, and it can signal nobody.
    assert_eq!(
        clean(&run(&c, &s, NEIGHBOURS).await),
        "pids [1]\nsignalable []\n"
    );
    // Its confinement is the old one's, to the byte.
    let again = clean(&run(&c, &s, "import os\nos.remove('/workspace/w.txt')").await);
    assert_eq!(again, "");
    assert_eq!(clean(&run(&c, &s, CONFINEMENT).await), CONFINED);
    // It keeps state from its own first cell on, and answers interrupts.
    let r = send(&c, fresh(&s, "y = 'mine'")).await;
    assert_reset(&r, ResetReason::FreshRequested);
    let cut = send(
        &c,
        limited(&s, "import time\ntime.sleep(60)", |l| {
            l.wall_time_ms = Some(1000)
        }),
    )
    .await;
    assert_stderr_ends_with(&cut, "KeyboardInterrupt: \n");
    let kept = run(&c, &s, "print(y)").await;
    assert_kept(&kept);
    assert_eq!(stdout(&kept), "mine\n");
    assert_eq!(stats(&c).await.starts_in_place, before.starts_in_place + 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn in_place_a_python_that_left_system_v_objects_gets_a_new_jail() {
    let d = Daemon::start(&policy());
    let c = d.client().await;
    let s = forked_session(&d, &c).await;
    let shm = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n\
               print(libc.shmget(0, 4096, 0o1600) >= 0)";
    assert_eq!(clean(&run(&c, &s, shm).await), "True\n");
    let before = stats(&c).await;
    let look = "print(len(open('/proc/sysvipc/shm').readlines()))";
    let r = send(&c, fresh(&s, look)).await;
    assert_reset(&r, ResetReason::FreshRequested);
    // The header line only: the object went with the old jail.
    assert_eq!(clean(&r), "1\n");
    let after = stats(&c).await;
    assert_eq!(after.starts_in_place, before.starts_in_place, "{after:?}");
    assert_eq!(after.starts_forked, before.starts_forked + 1, "{after:?}");
    // Other limits than the jail holds need a new jail too.
    let r = send(
        &c,
        limited(&s, FORKED, |l| l.memory_bytes = Some(300 << 20)),
    )
    .await;
    assert_eq!(clean(&r), "True\n");
    let mut other = limited(&s, FORKED, |l| l.memory_bytes = Some(200 << 20));
    other.fresh = true;
    assert_eq!(clean(&send(&c, other).await), "True\n");
    let last = stats(&c).await;
    assert_eq!(last.starts_in_place, before.starts_in_place, "{last:?}");
    assert_eq!(last.starts_forked, before.starts_forked + 3, "{last:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn in_place_a_python_that_ends_itself_is_reported_and_replaced() {
    let d = Daemon::start(&policy());
    let c = d.client().await;
    let s = forked_session(&d, &c).await;
    let r = send(&c, fresh(&s, "print('in place')")).await;
    assert_eq!(clean(&r), "in place\n");
    assert_eq!(stats(&c).await.starts_in_place, 1);
    // The new python's own end ends the jail, as the first one's would.
    let r = run(&c, &s, "import os\nos._exit(3)").await;
    assert_eq!(r.outcome.exit_code, Some(3), "{r:?}");
    let r = run(&c, &s, FORKED).await;
    assert_reset(&r, ResetReason::CodeExited);
    assert_eq!(clean(&r), "True\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn in_place_each_fresh_python_draws_its_own_numpy_numbers() {
    let d = numpy_templates_daemon();
    let c = d.client().await;
    let s = forked_session_with(&d, &c, with_numpy).await;
    // Whether numpy came with the template, before the cell imports it.
    let draw = |fresh: bool| {
        RunRequest {
        code: "import sys\nhad = 'numpy.random' in sys.modules\nimport numpy\nprint(had, numpy.random.random())".into(),
        fresh,
        ..with_numpy(&s)
    }
    };
    let before = stats(&c).await;
    let mut draws = vec![clean(&send(&c, draw(false)).await)];
    for _ in 0..2 {
        let r = send(&c, draw(true)).await;
        assert_reset(&r, ResetReason::FreshRequested);
        draws.push(clean(&r));
    }
    let after = stats(&c).await;
    assert_eq!(
        after.starts_in_place,
        before.starts_in_place + 2,
        "{draws:?}"
    );
    for d in &draws {
        assert!(
            d.starts_with("True "),
            "numpy.random came with the template: {d}"
        );
    }
    // Pythons forked by one parent, one after the other: each from a
    // state of its own.
    assert_ne!(draws[0], draws[1], "{draws:?}");
    assert_ne!(draws[1], draws[2], "{draws:?}");
    assert_ne!(draws[0], draws[2], "{draws:?}");
}
