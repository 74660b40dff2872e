//! Helpers for the fork-template tests (`tests/tests/templates*.rs`): a
//! supervisor with templates on and no pool, and a session whose
//! interpreter was forked from the template, once the template is up.

use crate::daemon::{run_req, Daemon};
use crate::live::{live_policy, send, stderr, stdout, HANG_GUARD, NO_POOL};
use prims_protocol::client::Client;
use prims_protocol::wire::{RunReply, RunRequest};
use std::time::{Duration, Instant};

/// Templates on, no warm pool.
pub fn templates_policy() -> String {
    live_policy(&format!("{NO_POOL}fork_templates = true\n"), "")
}

/// A supervisor with templates on whose template holds numpy's global
/// random state: numpy 2 loads `numpy.random`, and seeds that state, only
/// on first use, so the template imports it by name. Sessions get numpy
/// with [`with_numpy`].
pub fn numpy_templates_daemon() -> Daemon {
    Daemon::start_with_python(
        &templates_policy(),
        "prewarm_imports = [\"random\", \"numpy\", \"numpy.random\"]",
    )
}

/// An empty call of `session` in the environment with numpy.
pub fn with_numpy(session: &str) -> RunRequest {
    RunRequest {
        requirements: vec!["numpy".into()],
        ..run_req(session, "")
    }
}

/// A reply's stdout, failing on anything on stderr.
pub fn clean(r: &RunReply) -> String {
    assert_eq!(stderr(r), "", "{r:?}");
    stdout(r)
}

/// Python that says whether it runs in a forked child: only a template's
/// root has `/.t`.
pub const FORKED: &str = "import os\nprint(os.path.isdir('/.t'))";

/// A new session whose first interpreter was forked from the template,
/// once the template is up (the first start that wants it starts it).
pub async fn forked_session(d: &Daemon, c: &Client) -> String {
    forked_session_with(d, c, |s| run_req(s, FORKED)).await
}

/// [`forked_session`], its calls made as `req` makes them.
pub async fn forked_session_with(
    d: &Daemon,
    c: &Client,
    req: impl Fn(&str) -> RunRequest,
) -> String {
    let deadline = Instant::now() + HANG_GUARD * 5;
    loop {
        let s = c.open_session(None).await.unwrap().session_id;
        let mut r = req(&s);
        r.code = FORKED.into();
        let r = send(c, r).await;
        if stdout(&r) == "True\n" {
            return s;
        }
        assert_eq!(stdout(&r), "False\n", "{r:?}");
        assert!(
            Instant::now() < deadline,
            "no template came up:\n{}",
            d.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Host pids of `d`'s template pythons: a python in our pid namespace
/// (every interpreter has its own) whose jail's jailer is the supervisor's
/// child (each child's parent outside its namespace is a fork of the
/// template, one level further down).
pub fn template_pythons(d: &Daemon) -> Vec<i32> {
    let parent = |pid: i32| -> Option<i32> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("PPid:"))
            .and_then(|v| v.trim().parse().ok())
    };
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let nspid = status.lines().find_map(|l| l.strip_prefix("NSpid:"));
        let ours = nspid.is_some_and(|v| v.split_whitespace().count() == 1);
        let grandparent = parent(pid).and_then(parent).and_then(parent);
        if ours && cmdline.starts_with(b"/venv/bin/python") && grandparent == Some(d.pid() as i32) {
            found.push(pid);
        }
    }
    found
}
