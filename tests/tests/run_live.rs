//! `prims run --live`: the script as the one cell of a live interpreter,
//! where it differs from a one-shot run (an uncaught exception is status
//! `error`) and where the interpreter's agent could lose track of the code:
//! python dying mid-cell, or the code replacing python with `exec`.

use prims_tests::*;

#[test]
fn live_uncaught_exception_is_error_with_traceback() {
    let run = Job::new("x = 41\nraise ValueError('boom %d' % (x + 1))\n")
        .live()
        .run();
    run.assert_status("error");
    assert_eq!(run.exit_code(), Some(1), "{}", run.describe());
    assert_eq!(run.prims_exit(), Some(1), "{}", run.describe());
    let err = run.stderr();
    assert!(
        err.contains("Traceback")
            && err.contains("Cell In[1], line 2")
            && err.contains("ValueError: boom 42"),
        "stderr has the traceback:\n{}",
        run.describe()
    );
}

#[test]
fn live_output_before_python_dies_is_kept() {
    let run = Job::new(
        "import os, sys\nprint('out', flush=True)\nprint('err', file=sys.stderr, flush=True)\nos._exit(7)\n",
    )
    .live()
    .run();
    run.assert_status("exit");
    assert_eq!(run.exit_code(), Some(7), "{}", run.describe());
    assert_eq!(run.stdout(), "out\n", "{}", run.describe());
    assert_eq!(run.stderr(), "err\n", "{}", run.describe());
}

/// A cell that prints `before`, then replaces python with a python that
/// runs `then`.
fn replace_python(then: &str) -> String {
    format!(
        "import os\nprint('before', flush=True)\nos.execv('/venv/bin/python', ['python', '-c', {}])\n",
        py_str(then)
    )
}

#[test]
fn live_exec_replacing_python_runs_to_its_end() {
    let code = replace_python("import sys; print('after', flush=True); sys.exit(3)");
    let run = Job::new(code).live().run();
    run.assert_status("exit");
    assert_eq!(run.exit_code(), Some(3), "{}", run.describe());
    assert_eq!(run.stdout(), "before\nafter\n", "{}", run.describe());
}

#[test]
fn live_exec_replacing_python_still_has_a_wall_limit() {
    let marker = unique("live-exec");
    let code = replace_python(&format!(
        "import time; print('after', flush=True); time.sleep(60)  # {marker}"
    ));
    let run = Job::new(code).policy(policy_with("2s", "")).live().run();
    assert_no_survivors(&marker, "after the wall-time kill of exec'd code");
    run.assert_status("timeout");
    assert_eq!(run.json["timeout_kind"], "wall", "{}", run.describe());
    assert_eq!(
        run.signal(),
        Some(i64::from(libc::SIGKILL)),
        "{}",
        run.describe()
    );
    assert!(
        run.wall_ms().is_some_and(|ms| ms >= 2000),
        "wall_ms counts the exec'd code's time:\n{}",
        run.describe()
    );
    assert_eq!(run.stdout(), "before\nafter\n", "{}", run.describe());
}

#[test]
fn live_background_process_dies_with_the_jail() {
    let marker = unique("live-bg");
    let code = format!(
        r#"
import subprocess
subprocess.Popen(['/venv/bin/python', '-c', 'import time; time.sleep(60)  # {marker}'], start_new_session=True)
print('started')
"#
    );
    let run = Job::new(code).live().run();
    run.assert_ok();
    assert_no_survivors(&marker, "after prims run --live returned");
}

#[test]
fn live_missing_interpreter_is_setup_error() {
    let policy = policy_with(
        "5s",
        "[filesystem]\ninterpreters = { \"3.11\" = \"/nonexistent/python\" }\ndefault_interpreter = \"3.11\"\n",
    );
    let run = Job::new("print(1)").policy(policy).live().run();
    run.assert_status("setup_error");
    assert_eq!(run.prims_exit(), Some(125), "{}", run.describe());
    let msg = run.json["setup_error"]["message"].as_str().unwrap_or("");
    assert!(
        msg.contains("/nonexistent/python"),
        "setup_error.message names the missing interpreter:\n{}",
        run.describe()
    );
}
