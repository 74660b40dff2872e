//! SystemExit ends a cell, not the interpreter.

use super::harness::Live;
use crate::interpreters::channel::CellStatus;

#[tokio::test]
async fn sys_exit_codes_map_to_status_and_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = Live::start(dir.path()).await;
    a.ok("import sys\nx = 1").await;
    for (code, status, exit_code, stderr) in [
        ("sys.exit()", CellStatus::Ok, 0, ""),
        ("sys.exit(0)", CellStatus::Ok, 0, ""),
        ("sys.exit(None)", CellStatus::Ok, 0, ""),
        ("sys.exit(3)", CellStatus::Exit, 3, ""),
        ("sys.exit(True)", CellStatus::Exit, 1, ""),
        ("sys.exit(-2)", CellStatus::Exit, -2, ""),
        ("sys.exit(2 ** 40)", CellStatus::Exit, 1, ""),
        ("sys.exit('bye')", CellStatus::Exit, 1, "bye\n"),
        (
            "print('before')\nraise SystemExit(7)",
            CellStatus::Exit,
            7,
            "",
        ),
    ] {
        let run = a.cell(code).await;
        assert_eq!(run.done.status, status, "{code}");
        assert_eq!(run.done.exit_code, Some(exit_code), "{code}");
        assert_eq!(run.done.exception, None, "{code}");
        assert_eq!(run.stderr, stderr, "{code}");
    }
    assert_eq!(
        a.ok("x").await.as_deref(),
        Some("1"),
        "the interpreter lives on"
    );
}

#[tokio::test]
async fn sys_exit_caught_inside_a_try_is_just_code() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = Live::start(dir.path()).await;
    let run = a
        .cell("import sys\ntry:\n    sys.exit(1)\nexcept SystemExit:\n    pass\nprint('after')")
        .await;
    assert_eq!(
        (run.done.status, run.done.exit_code),
        (CellStatus::Ok, Some(0))
    );
    assert_eq!(run.stdout, "after\n");
}
