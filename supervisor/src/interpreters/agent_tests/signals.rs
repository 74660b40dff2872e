//! SIGINT interrupts a running cell and nothing else.

use super::harness::Live;
use crate::interpreters::channel::{CellStatus, ChannelError};
use nix::sys::signal::Signal;
use std::time::Duration;

const SLEEPER: &str =
    "import time\nprint('sleeping', flush=True)\nfor _ in range(600): time.sleep(0.05)";

#[tokio::test]
async fn sigint_during_a_cell_is_a_keyboard_interrupt_and_keeps_state() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = Live::start(dir.path()).await;
    a.ok("x = 41").await;
    a.send_cell(SLEEPER).await;
    a.stdout.wait_for("sleeping\n").await;
    a.signal(Signal::SIGINT);
    let done = a.done().await;
    assert_eq!(done.status, CellStatus::Error);
    assert_eq!(done.exception.as_deref(), Some("KeyboardInterrupt"));
    let (stdout, stderr) = a.output().await;
    assert_eq!(stdout, "sleeping\n");
    assert!(stderr.ends_with("KeyboardInterrupt\n"), "{stderr}");
    assert!(stderr.contains("<cell 2>"), "{stderr}");
    assert_eq!(a.ok("x + 1").await.as_deref(), Some("42"));
}

#[tokio::test]
async fn a_sigint_after_a_cell_does_not_interrupt_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = Live::start(dir.path()).await;
    a.ok("import time\nx = 1").await;
    a.signal(Signal::SIGINT);
    let slow = "time.sleep(0.3)\n'survived'";
    assert_eq!(a.ok(slow).await.as_deref(), Some("'survived'"));
    // Again with a thread of the user's alive: the signal lands on it, since
    // the agent's thread has SIGINT blocked between cells.
    let thread = "import threading\nt = threading.Thread(target=time.sleep, args=(5,), daemon=True)\nt.start()";
    a.ok(thread).await;
    a.signal(Signal::SIGINT);
    assert_eq!(a.ok(slow).await.as_deref(), Some("'survived'"));
    assert_eq!(a.ok("x").await.as_deref(), Some("1"));
}

#[tokio::test]
async fn the_users_sigint_handler_is_kept_between_cells() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = Live::start(dir.path()).await;
    let default = "import signal\nsignal.getsignal(signal.SIGINT) is signal.default_int_handler";
    assert_eq!(a.ok(default).await.as_deref(), Some("True"));
    a.ok("def mine(*a):\n    raise RuntimeError('mine')\nsignal.signal(signal.SIGINT, mine)")
        .await;
    assert_eq!(
        a.ok("signal.getsignal(signal.SIGINT) is mine")
            .await
            .as_deref(),
        Some("True")
    );
    a.send_cell(SLEEPER).await;
    a.stdout.wait_for("sleeping\n").await;
    a.signal(Signal::SIGINT);
    let done = a.done().await;
    assert_eq!(done.exception.as_deref(), Some("RuntimeError"));
    a.output().await;
}

#[tokio::test]
async fn a_handler_that_swallows_sigint_leaves_the_agent_quiet_and_killable() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = Live::start(dir.path()).await;
    let swallow =
        "import signal\nsignal.signal(signal.SIGINT, lambda *a: print('swallowed', flush=True))";
    a.ok(swallow).await;
    a.send_cell(SLEEPER).await;
    a.stdout.wait_for("sleeping\n").await;
    a.signal(Signal::SIGINT);
    a.stdout.wait_for("swallowed\n").await;
    // The cell goes on sleeping: nothing arrives on the channel meanwhile.
    let quiet = tokio::time::timeout(Duration::from_millis(300), a.frames.recv()).await;
    assert!(quiet.is_err(), "{quiet:?}");
    a.signal(Signal::SIGKILL);
    assert!(matches!(
        a.next_frame().await,
        Some(Err(ChannelError::Closed))
    ));
    assert!(
        a.stderr.rest().await.is_empty(),
        "no complaint from the agent"
    );
}
