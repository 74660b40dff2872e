//! The agent on the oldest and newest CPython it supports, when pyenv has
//! them installed here (3.8 and 3.13); /usr/bin/python3 runs everything else.

use super::harness::{Live, Start};
use crate::interpreters::channel::{CellStatus, FromAgent, ToAgent};
use nix::sys::signal::Signal;
use std::path::PathBuf;

fn pyenv_pythons() -> Vec<(String, PathBuf)> {
    let root = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pyenv")))
        .unwrap_or_else(|| PathBuf::from("/root/.pyenv"));
    let Ok(entries) = std::fs::read_dir(root.join("versions")) else {
        return Vec::new();
    };
    let mut found: Vec<(String, PathBuf)> = entries
        .filter_map(|e| {
            let version = e.ok()?.file_name().into_string().ok()?;
            let wanted = version.starts_with("3.8.") || version.starts_with("3.13.");
            let python = root.join("versions").join(&version).join("bin/python3");
            (wanted && python.exists()).then_some((version, python))
        })
        .collect();
    found.sort();
    found
}

#[tokio::test]
async fn the_agent_works_on_the_oldest_and_newest_supported_python() {
    let pythons = pyenv_pythons();
    if pythons.is_empty() {
        eprintln!("no pyenv 3.8 or 3.13 here; /usr/bin/python3 covers the agent");
    }
    for (version, python) in pythons {
        let dir = tempfile::tempdir().unwrap();
        let start = || {
            let mut s = Start::new(dir.path());
            s.python = python.clone();
            s.prewarm = Some("json,nonexistent_mod".into());
            s
        };
        let mut a = Live::start_with(start()).await;
        assert_eq!(a.ready.python, version);
        assert_eq!(a.ready.imported, ["json"]);
        assert_eq!(a.ready.failed[0].name, "nonexistent_mod");
        a.ok("x = 41").await;
        assert_eq!(a.cell("print(x + 1)").await.stdout, "42\n", "{version}");
        assert_eq!(a.ok("x + 1").await.as_deref(), Some("42"), "{version}");
        let run = a.cell("1 / 0").await;
        assert_eq!(
            run.done.exception.as_deref(),
            Some("ZeroDivisionError"),
            "{version}"
        );
        assert!(
            run.stderr.contains("<cell 4>") && !run.stderr.contains("<string>"),
            "{version}: {}",
            run.stderr
        );
        let run = a.cell("x = (").await;
        assert_eq!(
            run.done.exception.as_deref(),
            Some("SyntaxError"),
            "{version}"
        );
        let run = a.cell("import sys\nsys.exit('bye')").await;
        assert_eq!(
            (run.done.status, run.stderr.as_str()),
            (CellStatus::Exit, "bye\n"),
            "{version}"
        );
        let run = a.cell("import os\nos.system('echo sub')").await;
        assert_eq!(run.stdout, "sub\n", "{version}");

        a.send_cell(
            "import time\nprint('sleeping', flush=True)\nfor _ in range(600): time.sleep(0.05)",
        )
        .await;
        a.stdout.wait_for("sleeping\n").await;
        a.signal(Signal::SIGINT);
        assert_eq!(
            a.done().await.exception.as_deref(),
            Some("KeyboardInterrupt"),
            "{version}"
        );
        a.output().await;
        a.signal(Signal::SIGINT);
        assert_eq!(
            a.ok("time.sleep(0.2)\nx").await.as_deref(),
            Some("41"),
            "{version}"
        );

        let path = dir.path().join(".prims/state.pickle");
        let path_str = path.to_str().unwrap().to_string();
        a.ok("import json\nd = {'k': [1]}\nf = lambda: 0").await;
        match a
            .request(&ToAgent::Save {
                path: path_str.clone(),
                durable: true,
                check: false,
            })
            .await
        {
            FromAgent::Saved { skipped, .. } => {
                assert_eq!(skipped.len(), 1, "{version}: {skipped:?}");
                assert_eq!(skipped[0].name, "f");
            }
            other => panic!("{version}: {other:?}"),
        }
        drop(a);
        let mut b = Live::start_with(start()).await;
        match b.request(&ToAgent::Restore { path: path_str }).await {
            FromAgent::Restored { failed, .. } => assert_eq!(failed, [], "{version}"),
            other => panic!("{version}: {other:?}"),
        }
        assert_eq!(
            b.ok("json.dumps(d), x").await.as_deref(),
            Some("('{\"k\": [1]}', 41)"),
            "{version}"
        );
    }
}
