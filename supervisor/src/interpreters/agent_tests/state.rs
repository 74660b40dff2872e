//! Save in one interpreter, restore in the next; both inside the agent.

use super::harness::{Live, Start};
use crate::interpreters::channel::{FromAgent, Named, ToAgent};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn save(path: &Path) -> ToAgent {
    ToAgent::Save {
        path: path.to_str().unwrap().into(),
        durable: true,
        check: false,
    }
}

fn restore(path: &Path) -> ToAgent {
    ToAgent::Restore {
        path: path.to_str().unwrap().into(),
    }
}

fn names(skipped: &[Named]) -> Vec<&str> {
    skipped.iter().map(|n| n.name.as_str()).collect()
}

#[tokio::test]
async fn what_pickles_survives_into_a_new_interpreter() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".prims/state.pickle");
    let mut first = Live::start(dir.path()).await;
    first
        .ok(concat!(
            "import json\n",
            "from collections import OrderedDict\n",
            "n = 41\n",
            "d = {'a': [1, 2], 'b': OrderedDict(c=3)}\n",
            "f = lambda: 1\n",
            "fh = open(__import__('os').devnull)\n",
            "class Local:\n    pass\n",
            "obj = Local()\n",
            "big = b'x' * 10\n",
            "_hidden = 'saved too'\n",
            "n + 1",
        ))
        .await;
    let (saved, skipped) = match first.request(&save(&path)).await {
        FromAgent::Saved { saved, skipped } => (saved, skipped),
        other => panic!("{other:?}"),
    };
    for name in ["json", "OrderedDict", "n", "d", "big", "_hidden"] {
        assert!(saved.iter().any(|s| s == name), "{name} not in {saved:?}");
    }
    assert!(
        !saved.iter().any(|s| s.starts_with("__") || s == "_"),
        "{saved:?}"
    );
    let mut skipped_names = names(&skipped);
    skipped_names.sort_unstable();
    assert_eq!(skipped_names, ["Local", "f", "fh", "obj"]);
    let why = |name: &str| skipped.iter().find(|n| n.name == name).unwrap().why.clone();
    assert_eq!(
        why("f"),
        "PicklingError: function <lambda> is defined in a cell, not in an importable module"
    );
    assert!(why("fh").contains("TextIOWrapper"), "{}", why("fh"));
    assert!(
        why("obj").contains("class Local is defined in a cell"),
        "{}",
        why("obj")
    );
    let parent = std::fs::metadata(dir.path().join(".prims")).unwrap();
    assert_eq!(parent.permissions().mode() & 0o777, 0o700);
    let leftovers: Vec<_> = std::fs::read_dir(dir.path().join(".prims"))
        .unwrap()
        .collect();
    assert_eq!(leftovers.len(), 1, "only the state file, no temporary");
    drop(first);

    let mut second = Live::start(dir.path()).await;
    let (restored, failed) = match second.request(&restore(&path)).await {
        FromAgent::Restored { restored, failed } => (restored, failed),
        other => panic!("{other:?}"),
    };
    assert_eq!(failed, []);
    let mut restored_names = restored.clone();
    restored_names.sort_unstable();
    let mut saved_names = saved.clone();
    saved_names.sort_unstable();
    assert_eq!(restored_names, saved_names);
    assert!(
        path.exists(),
        "the state file stays, the last save until a newer one"
    );
    let check =
        "(n + 1, d['b']['c'], json.dumps(d['a']), type(d['b']) is OrderedDict, big, _hidden)";
    assert_eq!(
        second.ok(check).await.as_deref(),
        Some("(42, 3, '[1, 2]', True, b'xxxxxxxxxx', 'saved too')")
    );
}

#[tokio::test]
async fn restoring_a_missing_file_restores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = Live::start(dir.path()).await;
    let reply = a
        .request(&restore(&dir.path().join("nothing/here.pickle")))
        .await;
    assert_eq!(
        reply,
        FromAgent::Restored {
            restored: vec![],
            failed: vec![]
        }
    );
    assert_eq!(a.ok("1").await.as_deref(), Some("1"));
}

#[tokio::test]
async fn a_state_file_that_is_not_ours_is_reported_and_removed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.pickle");
    std::fs::write(&path, b"PRIMS-STATE-1\nPxxx").unwrap();
    let mut a = Live::start(dir.path()).await;
    match a.request(&restore(&path)).await {
        FromAgent::Restored { restored, failed } => {
            assert_eq!(restored, Vec::<String>::new());
            assert_eq!(names(&failed), ["<state file>"]);
            assert_eq!(failed[0].why, "truncated");
        }
        other => panic!("{other:?}"),
    }
    assert!(!path.exists());
    std::fs::write(&path, b"garbage").unwrap();
    match a.request(&restore(&path)).await {
        FromAgent::Restored { failed, .. } => assert_eq!(failed[0].why, "not a PRIMS state file"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_value_that_fails_to_unpickle_is_reported_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.pickle");
    let mut first = Live::start(dir.path()).await;
    // A module-level class that the next interpreter will lack.
    first
        .ok("import sys, types\nm = types.ModuleType('gone')\nexec('class T:\\n    pass', m.__dict__)\nsys.modules['gone'] = m\nt = m.T()\nkeep = 5")
        .await;
    match first.request(&save(&path)).await {
        FromAgent::Saved { saved, .. } => assert!(saved.contains(&"t".to_string()), "{saved:?}"),
        other => panic!("{other:?}"),
    }
    let mut second = Live::start(dir.path()).await;
    match second.request(&restore(&path)).await {
        FromAgent::Restored { restored, failed } => {
            assert!(restored.contains(&"keep".to_string()), "{restored:?}");
            let mut failed_names = names(&failed);
            failed_names.sort_unstable();
            assert_eq!(failed_names, ["m", "t"]);
            assert!(
                failed
                    .iter()
                    .all(|n| n.why.starts_with("ModuleNotFoundError")),
                "{failed:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(second.ok("keep").await.as_deref(), Some("5"));
}

#[tokio::test]
async fn with_cloudpickle_code_defined_in_cells_is_carried_by_value() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".prims/state.pickle");
    let mut first = Live::start_with(Start::ipython(dir.path())).await;
    first
        .ok(concat!(
            "import threading\n",
            "scale = 2\n",
            "def g(x):\n    return x * scale\n",
            "def fact(n):\n    return 1 if n < 2 else n * fact(n - 1)\n",
            "def adder(k):\n    def add(x):\n        return x + k\n    return add\n",
            "add3 = adder(3)\n",
            "class Point:\n    def __init__(self, x):\n        self.x = x\n    def twice(self):\n        return g(self.x)\n",
            "p = Point(5)\n",
            "sq = lambda v: v * v\n",
            "table = {'sq': sq}\n",
            "gen = (i for i in range(3))\n",
            "lock = threading.Lock()\n",
        ))
        .await;
    let (saved, skipped) = match first.request(&save(&path)).await {
        FromAgent::Saved { saved, skipped } => (saved, skipped),
        other => panic!("{other:?}"),
    };
    for name in [
        "g", "fact", "adder", "add3", "Point", "p", "sq", "table", "scale",
    ] {
        assert!(saved.iter().any(|s| s == name), "{name} not in {saved:?}");
    }
    let mut skipped_names = names(&skipped);
    skipped_names.sort_unstable();
    assert_eq!(skipped_names, ["gen", "lock"], "{skipped:?}");
    assert!(skipped[0].why.contains("generator"), "{skipped:?}");
    drop(first);

    let mut second = Live::start_with(Start::ipython(dir.path())).await;
    match second.request(&restore(&path)).await {
        FromAgent::Restored { failed, .. } => assert_eq!(failed, []),
        other => panic!("{other:?}"),
    }
    // Restored code sees the new interpreter's globals by name, later
    // ones too; a class keeps its identity across records.
    let check = concat!(
        "scale = 10\n",
        "(g(4), fact(5), add3(1), p.twice(), type(p) is Point, table['sq'](7), sq(3), g.__module__)"
    );
    assert_eq!(
        second.ok(check).await.as_deref(),
        Some("(40, 120, 4, 50, True, 49, 9, '__main__')")
    );
}

#[tokio::test]
async fn a_value_larger_than_the_file_size_limit_is_saved_in_stripes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".prims/state.pickle");
    let mut first = Live::start(dir.path()).await;
    // As a jail's RLIMIT_FSIZE does: no file may pass 1 MiB.
    first
        .ok("import resource\nresource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))\nbig = bytes(range(256)) * (5 * 4096)\nsmall = 7")
        .await;
    match first.request(&save(&path)).await {
        FromAgent::Saved { saved, skipped } => {
            assert_eq!(skipped, [], "{skipped:?}");
            assert!(saved.contains(&"big".to_string()), "{saved:?}");
        }
        other => panic!("{other:?}"),
    }
    let stripes = std::fs::read_dir(&path).unwrap().count();
    assert!(stripes >= 5, "{stripes} stripes");
    for e in std::fs::read_dir(&path).unwrap() {
        assert!(e.unwrap().metadata().unwrap().len() <= 1 << 20);
    }
    drop(first);
    let mut second = Live::start(dir.path()).await;
    match second.request(&restore(&path)).await {
        FromAgent::Restored { failed, .. } => assert_eq!(failed, []),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        second
            .ok("big == bytes(range(256)) * (5 * 4096), small")
            .await
            .as_deref(),
        Some("(True, 7)")
    );
    assert!(path.exists(), "the last save stays");
}

#[tokio::test]
async fn a_checked_save_names_a_value_that_does_not_load_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".prims/state.pickle");
    let mut a = Live::start(dir.path()).await;
    // Classes of an importable module: this agent has no cloudpickle for
    // cell-defined ones. Loading a Counted runs code in __main__ and prints.
    std::fs::write(
        dir.path().join("fragmod.py"),
        concat!(
            "def refuse():\n    raise RuntimeError('cannot be rebuilt')\n",
            "class Fragile:\n    def __reduce__(self):\n        return (refuse, ())\n",
            "class Counted:\n    def __reduce__(self):\n",
            "        return (exec, (\"import __main__; __main__.loads.append(1); print('loaded')\",))\n",
        ),
    )
    .unwrap();
    let dir_str = dir.path().to_str().unwrap();
    a.ok(&format!(
        "import sys\nsys.path.insert(0, {dir_str:?})\nimport fragmod\nloads = []\n\
         fragile, counter, n = fragmod.Fragile(), fragmod.Counted(), 1\nhuge = bytes(2 << 20)\n1"
    ))
    .await;
    let checked = ToAgent::Save {
        path: path.to_str().unwrap().into(),
        durable: false,
        check: true,
    };
    let (saved, skipped) = match a.request(&checked).await {
        FromAgent::Saved { saved, skipped } => (saved, skipped),
        other => panic!("{other:?}"),
    };
    assert_eq!(names(&skipped), ["fragile"]);
    assert_eq!(
        skipped[0].why,
        "saved, but loading it fails: RuntimeError: cannot be rebuilt"
    );
    for n in ["counter", "n", "huge", "loads", "fragmod"] {
        assert!(saved.iter().any(|s| s == n), "{n} in {saved:?}");
    }
    // The trial loaded `counter` in a child: the session saw nothing of it,
    // and the channel still works (the child's print went to /dev/null).
    assert_eq!(a.ok("len(loads)").await.as_deref(), Some("0"));
    // The record stays: a restore names the value again.
    let mut b = Live::start(dir.path()).await;
    match b.request(&restore(&path)).await {
        FromAgent::Restored { restored, failed } => {
            // (fragmod too: this interpreter's sys.path lacks its directory.)
            assert!(names(&failed).contains(&"fragile"), "{failed:?}");
            assert!(restored.iter().any(|r| r == "huge"), "{restored:?}");
        }
        other => panic!("{other:?}"),
    }
}

/// A session's secrets' placeholders reach its environment, a later set
/// replaces the earlier one, and a bad name changes nothing.
#[tokio::test]
async fn environ_sets_and_unsets_the_sessions_variables() {
    use std::collections::BTreeMap;
    let dir = tempfile::tempdir().unwrap();
    let mut live = Live::start(dir.path()).await;
    let set = |pairs: &[(&str, &str)], unset: &[&str]| ToAgent::Environ {
        set: pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
        unset: unset.iter().map(|s| s.to_string()).collect(),
    };
    let reply = live
        .request(&set(
            &[("EXAMPLE_TOKEN", "prims-secret-00"), ("OTHER", "x")],
            &[],
        ))
        .await;
    assert!(matches!(reply, FromAgent::EnvironSet {}), "{reply:?}");
    let got = live
        .ok("import os; (os.environ.get('EXAMPLE_TOKEN'), os.environ.get('OTHER'))")
        .await;
    assert_eq!(got.as_deref(), Some("('prims-secret-00', 'x')"));
    let reply = live
        .request(&set(&[("EXAMPLE_TOKEN", "prims-secret-00")], &["OTHER"]))
        .await;
    assert!(matches!(reply, FromAgent::EnvironSet {}), "{reply:?}");
    let reply = live.request(&set(&[("BAD=NAME", "v")], &[])).await;
    assert!(
        matches!(&reply, FromAgent::Error { message } if message.contains("not a variable name")),
        "{reply:?}"
    );
    let got = live
        .ok("import os; (os.environ.get('EXAMPLE_TOKEN'), 'OTHER' in os.environ, 'BAD=NAME' in os.environ)")
        .await;
    assert_eq!(got.as_deref(), Some("('prims-secret-00', False, False)"));
}
