//! Cells run notebook style in one persistent namespace.

use super::harness::{Live, Start};
use crate::interpreters::agent::RESULT_MAX_CHARS;
use crate::interpreters::channel::{CellStatus, FromAgent, Named};

#[tokio::test]
async fn cells_share_globals_and_a_last_expression_is_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = Live::start(dir.path()).await;
    let run = a.cell("x = 41").await;
    assert_eq!(
        (run.done.status, run.done.exit_code),
        (CellStatus::Ok, Some(0))
    );
    assert_eq!(
        (run.done.result, run.stdout, run.stderr),
        (None, String::new(), String::new())
    );
    let run = a.cell("print(x + 1)").await;
    assert_eq!(run.stdout, "42\n");
    assert_eq!(run.done.result, None);
    assert_eq!(a.ok("x + 1").await.as_deref(), Some("42"));
    assert_eq!(a.ok("None").await, None, "None is no result");
    assert_eq!(
        a.ok("_").await.as_deref(),
        Some("42"),
        "the last result is _"
    );
    assert_eq!(a.ok("y = x\ny * 2").await.as_deref(), Some("82"));
    assert_eq!(
        a.ok("def f(n):\n    return n * x\nf(2)").await.as_deref(),
        Some("82")
    );
}

#[tokio::test]
async fn an_exception_fails_the_cell_with_a_traceback_of_user_frames_only() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = Live::start(dir.path()).await;
    a.ok("x = 41").await;
    let run = a.cell("def boom():\n    return 1 / 0\nboom()").await;
    assert_eq!(run.done.status, CellStatus::Error);
    assert_eq!(run.done.exit_code, Some(1));
    assert_eq!(run.done.exception.as_deref(), Some("ZeroDivisionError"));
    assert_eq!(run.stdout, "");
    let tb = &run.stderr;
    assert!(
        tb.starts_with("Traceback (most recent call last):\n"),
        "{tb}"
    );
    assert!(
        tb.contains("File \"<cell 2>\", line 3, in <module>"),
        "{tb}"
    );
    assert!(
        tb.contains("return 1 / 0"),
        "the cell's source is shown: {tb}"
    );
    assert!(
        tb.ends_with("ZeroDivisionError: division by zero\n"),
        "{tb}"
    );
    for agent_frame in ["<string>", "_run_user", "_execute", "exec(", "eval("] {
        assert!(!tb.contains(agent_frame), "{agent_frame} in {tb}");
    }
    assert_eq!(a.ok("x").await.as_deref(), Some("41"), "the state survives");
}

#[tokio::test]
async fn a_syntax_error_is_an_ordinary_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = Live::start(dir.path()).await;
    let run = a.cell("x = (").await;
    assert_eq!(run.done.status, CellStatus::Error);
    assert_eq!(run.done.exception.as_deref(), Some("SyntaxError"));
    assert!(
        run.stderr.contains("File \"<cell 1>\", line 1"),
        "{}",
        run.stderr
    );
    assert!(
        !run.stderr.contains("Traceback"),
        "no agent frames: {}",
        run.stderr
    );
    assert_eq!(a.ok("1 + 1").await.as_deref(), Some("2"));
}

#[tokio::test]
async fn exception_names_are_qualified_like_tracebacks() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = Live::start(dir.path()).await;
    let run = a.cell("import json\njson.loads('{')").await;
    assert_eq!(
        run.done.exception.as_deref(),
        Some("json.decoder.JSONDecodeError")
    );
    let run = a
        .cell("class Mine(Exception):\n    pass\nraise Mine('m')")
        .await;
    assert_eq!(run.done.exception.as_deref(), Some("Mine"));
    assert!(run.stderr.ends_with("Mine: m\n"), "{}", run.stderr);
}

#[tokio::test]
async fn results_are_reprs_cut_to_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = Live::start(dir.path()).await;
    let run = a.cell("'é' * 20000").await;
    let result = run.done.result.unwrap();
    assert_eq!(result.chars().count(), RESULT_MAX_CHARS);
    assert!(result.starts_with("'éé"));
    assert!(run.done.result_truncated);
    let run = a.cell("'short'").await;
    assert_eq!(
        (run.done.result.as_deref(), run.done.result_truncated),
        (Some("'short'"), false)
    );
    let run = a
        .cell("class R:\n    def __repr__(self):\n        raise ValueError('no')\nR()")
        .await;
    assert_eq!(run.done.status, CellStatus::Ok);
    assert_eq!(
        run.done.result.as_deref(),
        Some("<repr failed: ValueError: no>")
    );
    // A repr with a lone surrogate still travels as UTF-8.
    let run = a
        .cell("class S:\n    def __repr__(self):\n        return '\\ud800'\nS()")
        .await;
    assert_eq!(run.done.result.as_deref(), Some("\\ud800"));
}

#[tokio::test]
async fn user_code_runs_as_main_with_an_empty_argv() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = Live::start(dir.path()).await;
    assert_eq!(a.ok("__name__").await.as_deref(), Some("'__main__'"));
    assert_eq!(a.ok("import sys\nsys.argv").await.as_deref(), Some("['']"));
    assert_eq!(
        a.ok("sys.modules['__main__'].__dict__ is globals()")
            .await
            .as_deref(),
        Some("True")
    );
    let pickled = "import pickle\nclass P:\n    pass\ntype(pickle.loads(pickle.dumps(P()))) is P";
    assert_eq!(a.ok(pickled).await.as_deref(), Some("True"));
    assert_eq!(
        a.ok("import os\nos.getcwd()").await,
        Some(format!(
            "'{}'",
            dir.path().canonicalize().unwrap().display()
        ))
    );
}

#[tokio::test]
async fn a_cell_of_twenty_thousand_characters_runs() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = Live::start(dir.path()).await;
    let code = format!("x = 0\n{}x", "x += 1\n".repeat(3000));
    assert!(code.len() > 20_000);
    assert_eq!(a.ok(&code).await.as_deref(), Some("3000"));
}

#[tokio::test]
async fn prewarm_imports_land_in_sys_modules_only_and_the_variable_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let mut start = Start::new(dir.path());
    start.prewarm = Some(" json , nonexistent_mod,,".into());
    let mut a = Live::start_with(start).await;
    assert!(a.ready.python.starts_with("3."), "{}", a.ready.python);
    assert_eq!(a.ready.imported, ["json"]);
    assert_eq!(a.ready.failed.len(), 1);
    let Named { name, why } = &a.ready.failed[0];
    assert_eq!(name, "nonexistent_mod");
    assert_eq!(
        why,
        "ModuleNotFoundError: No module named 'nonexistent_mod'"
    );
    assert_eq!(a.ok("'json' in globals()").await.as_deref(), Some("False"));
    assert_eq!(
        a.ok("import sys\n'json' in sys.modules").await.as_deref(),
        Some("True")
    );
    let env = "import os\n[k for k in os.environ if k.startswith('PRIMS')]";
    assert_eq!(a.ok(env).await.as_deref(), Some("[]"));
    let child =
        "import subprocess\nsubprocess.run(['sh', '-c', 'echo \"[$PRIMS_PREWARM]\"']).returncode";
    let run = a.cell(child).await;
    assert_eq!(run.stdout, "[]\n", "a subprocess does not see it either");
}

#[tokio::test]
async fn an_unknown_request_gets_an_error_and_the_agent_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = Live::start(dir.path()).await;
    let bad_marker = crate::interpreters::channel::ToAgent::Mark {
        marker: "NOT-HEX".into(),
    };
    match a.request(&bad_marker).await {
        FromAgent::Error { message } => assert!(message.contains("marker"), "{message}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(a.ok("1").await.as_deref(), Some("1"));
}
