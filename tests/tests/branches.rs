//! Branching live sessions on a real supervisor: forks that diverge and
//! see nothing of each other, forks of forks, a hostile `__reduce__` that
//! runs only in the branch's jail, refusals that change nothing (another
//! tenant, a bad count, a full disk, a used-up budget), checkpoints rolled
//! back and kept across a restart, and a graceful restart that keeps every
//! live session's globals.

use prims_protocol::client::ClientError;
use prims_protocol::jail::Status;
use prims_protocol::wire::{ErrorCode, InterpreterState, ResetReason, RunRequest};
use prims_tests::daemon::{run_req, Daemon};
use prims_tests::live::*;
use std::os::unix::fs::MetadataExt;

/// A session's state that covers what a branch must carry: plain values,
/// a function, a class and an instance of it, a lambda, a file.
const STATE: &str = "\
x = 1
def g(v):
    return v * x
class Point:
    def __init__(self, v):
        self.v = v
    def norm(self):
        return g(self.v)
p = Point(3)
sq = lambda v: v * v
open('notes.txt', 'w').write('source')
";

fn sorted(v: &[String]) -> Vec<&str> {
    let mut v: Vec<&str> = v.iter().map(String::as_str).collect();
    v.sort_unstable();
    v
}

fn code(e: &ClientError) -> Option<ErrorCode> {
    match e {
        ClientError::Server(r) => Some(r.code),
        _ => None,
    }
}

fn as_tenant(tenant: &str, sid: &str, code: &str) -> RunRequest {
    RunRequest {
        tenant: Some(tenant.into()),
        ..run_req(sid, code)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn branches_diverge_and_neither_siblings_nor_the_source_see_a_branch() {
    let d = Daemon::start(&live_policy(NO_POOL, ""));
    let c = d.client().await;
    let src = c.open_session(None).await.unwrap().session_id;
    assert_eq!(run(&c, &src, STATE).await.outcome.status, Status::Ok);

    let f = c.fork_session(&src, None, 2).await.unwrap();
    assert_eq!(f.sessions.len(), 2);
    for b in &f.sessions {
        assert_eq!(sorted(&b.restored), ["Point", "g", "p", "sq", "x"], "{b:?}");
        assert!(b.not_restored.is_empty(), "{b:?}");
    }
    let (a, b) = (&f.sessions[0].session_id, &f.sessions[1].session_id);
    assert!(a != b && a != &src && b != &src);

    let in_a = run(
        &c,
        a,
        "x = 10\nopen('notes.txt', 'w').write('a')\nopen('only_a', 'w').write('a')\n\
         print(g(2), p.norm(), sq(4), open('notes.txt').read())",
    )
    .await;
    assert_eq!(stdout(&in_a), "20 30 16 a\n", "{in_a:?}");
    assert_kept(&in_a);
    let check = "import os\nprint(x, g(2), p.norm(), type(p) is Point, sq(4), \
                 open('notes.txt').read(), os.path.exists('only_a'))";
    let in_b = run(&c, b, check).await;
    assert_eq!(stdout(&in_b), "1 2 3 True 16 source False\n", "{in_b:?}");
    let in_src = run(&c, &src, check).await;
    assert_eq!(
        stdout(&in_src),
        "1 2 3 True 16 source False\n",
        "{in_src:?}"
    );
    assert_kept(&in_src);

    // Each branch is a session of its own: its own uid and workspace.
    let uids: Vec<u32> = [&src, a, b]
        .iter()
        .map(|s| std::fs::metadata(d.workspace(s)).unwrap().uid())
        .collect();
    assert!(
        uids[0] != uids[1] && uids[1] != uids[2] && uids[0] != uids[2],
        "{uids:?}"
    );
    let files_b = std::fs::metadata(d.workspace(b).join("notes.txt")).unwrap();
    assert_eq!(files_b.uid(), uids[2], "a branch owns its copies");
}

#[tokio::test(flavor = "multi_thread")]
async fn forks_of_forks_carry_what_each_generation_added() {
    let d = Daemon::start(&live_policy(NO_POOL, ""));
    let c = d.client().await;
    let src = c.open_session(None).await.unwrap().session_id;
    run(
        &c,
        &src,
        "gen = ['root']\ndef lineage():\n    return '/'.join(gen)",
    )
    .await;
    let mut at = src.clone();
    for name in ["child", "grandchild"] {
        let f = c.fork_session(&at, None, 1).await.unwrap();
        at = f.sessions[0].session_id.clone();
        run(&c, &at, &format!("gen.append({name:?})")).await;
    }
    let r = run(&c, &at, "print(lineage())").await;
    assert_eq!(stdout(&r), "root/child/grandchild\n");
    let r = run(&c, &src, "print(lineage())").await;
    assert_eq!(stdout(&r), "root\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hostile_reduce_in_the_source_runs_only_in_the_branch_jail() {
    let d = Daemon::start(&live_policy(NO_POOL, ""));
    let c = d.client().await;
    let src = c.open_session(None).await.unwrap().session_id;
    let host_marker = d.dir.join("reduced-on-the-host");
    let payload = [
        "import os",
        "open('/workspace/reduced', 'w').write(str(os.getuid()))",
        "try:",
        &format!(
            "    open({:?}, 'w').write('escaped')",
            host_marker.display().to_string()
        ),
        "except OSError as e:",
        "    open('/workspace/refused', 'w').write(type(e).__name__)",
    ]
    .join("\n");
    let attack = format!(
        "PAYLOAD = {payload:?}\n\
         class Evil:\n    def __reduce__(self):\n        return (exec, (PAYLOAD,))\n\
         evil = Evil()\n"
    );
    assert_eq!(run(&c, &src, &attack).await.outcome.status, Status::Ok);
    let f = c.fork_session(&src, None, 1).await.unwrap();
    let branch = &f.sessions[0].session_id;
    assert!(
        f.sessions[0].restored.contains(&"evil".to_string()),
        "{f:?}"
    );
    // Unpickled in the branch's own interpreter, as the branch's user.
    let bw = d.workspace(branch);
    assert!(bw.join("reduced").exists(), "the payload ran in the branch");
    assert!(
        bw.join("refused").exists(),
        "the host path was out of reach"
    );
    assert!(!host_marker.exists(), "nothing ran outside a jail");
    assert!(!d.workspace(&src).join("reduced").exists());
    let owner = std::fs::metadata(bw.join("reduced")).unwrap().uid();
    assert_eq!(owner, std::fs::metadata(&bw).unwrap().uid());
}

#[tokio::test(flavor = "multi_thread")]
async fn refused_forks_change_nothing() {
    let d = Daemon::start(&live_policy(NO_POOL, "[branches]\nmax_forks = 3\n"));
    let c = d.client().await;
    let src = c.open_session(Some("alice")).await.unwrap().session_id;
    let r = send(&c, as_tenant("alice", &src, "x = 1")).await;
    assert_eq!(r.outcome.status, Status::Ok);
    let before = c.stats().await.unwrap().sessions;

    let e = c.fork_session(&src, Some("mallory"), 1).await.unwrap_err();
    assert_eq!(code(&e), Some(ErrorCode::NotFound), "{e}");
    for count in [0, 4] {
        let e = c
            .fork_session(&src, Some("alice"), count)
            .await
            .unwrap_err();
        assert_eq!(code(&e), Some(ErrorCode::BadRequest), "{e}");
        assert!(e.to_string().contains("1 to 3"), "{e}");
    }
    let e = c
        .fork_session("0123456789abcdef0123456789abcdef", Some("alice"), 1)
        .await
        .unwrap_err();
    assert_eq!(code(&e), Some(ErrorCode::NotFound), "{e}");
    assert_eq!(c.stats().await.unwrap().sessions, before);

    // A disk that cannot hold one more workspace beside what must stay
    // free: the fork is refused whole, and no branch is left behind.
    d.reload_and_wait(
        &format!(
            "[interpreters]\n{NO_POOL}[sessions]\ndisk_quota = \"32MiB\"\n\
             min_free_disk = \"1000TiB\"\n[branches]\nmax_forks = 3\n"
        ),
        HANG_GUARD,
    );
    let e = c.fork_session(&src, Some("alice"), 2).await.unwrap_err();
    assert_eq!(code(&e), Some(ErrorCode::Busy), "{e}");
    assert!(e.to_string().contains("disk"), "{e}");
    assert_eq!(c.stats().await.unwrap().sessions, before);
    let r = send(&c, as_tenant("alice", &src, "print(x)")).await;
    assert_eq!(stdout(&r), "1\n", "the source goes on");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_checkpoint_rolls_back_globals_and_files_and_survives_a_restart() {
    let mut d = Daemon::start(&live_policy(NO_POOL, ""));
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap().session_id;
    run(&c, &s, STATE).await;
    let k = c.checkpoint(&s, None, Some("before")).await.unwrap();
    assert!(k.bytes > 0 && k.not_saved.is_empty(), "{k:?}");
    assert_eq!(k.label.as_deref(), Some("before"));
    run(
        &c,
        &s,
        "x = 99\nlater = 1\nopen('notes.txt', 'w').write('changed')\nopen('new.txt', 'w').write('n')",
    )
    .await;

    let back = c
        .restore_checkpoint(&s, None, &k.checkpoint_id)
        .await
        .unwrap();
    assert_eq!(sorted(&back.restored), ["Point", "g", "p", "sq", "x"]);
    let check = "import os\nprint(x, 'later' in globals(), p.norm(), open('notes.txt').read(), \
                 os.path.exists('new.txt'))";
    let r = run(&c, &s, check).await;
    assert_eq!(stdout(&r), "1 False 3 source False\n", "{r:?}");
    assert_kept(&r);

    drop(c);
    d.restart_gracefully();
    let c = d.client().await;
    let listed = c.list_checkpoints(&s, None).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].checkpoint_id, k.checkpoint_id);
    run(&c, &s, "x = 5\nopen('notes.txt', 'w').write('again')").await;
    c.restore_checkpoint(&s, None, &k.checkpoint_id)
        .await
        .unwrap();
    let r = run(&c, &s, check).await;
    assert_eq!(stdout(&r), "1 False 3 source False\n", "{r:?}");

    // Root's alone (the copies keep the workspace files' modes), and
    // removed with the session.
    let dir = d.state.join("checkpoints");
    let mode = std::fs::metadata(&dir).unwrap().mode() & 0o777;
    assert_eq!(mode, 0o700);
    let before = std::fs::read_dir(&dir).unwrap().count();
    assert_eq!(before, 1);
    c.close_session(&s, None).await.unwrap();
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn checkpoint_refusals_change_nothing() {
    let d = Daemon::start(&live_policy(
        NO_POOL,
        "[branches]\nmax_checkpoints = 1\nmax_checkpoints_per_tenant = 1\n",
    ));
    let c = d.client().await;
    let s = c.open_session(Some("alice")).await.unwrap().session_id;
    send(&c, as_tenant("alice", &s, "x = 1")).await;
    let e = c.checkpoint(&s, Some("mallory"), None).await.unwrap_err();
    assert_eq!(code(&e), Some(ErrorCode::NotFound), "{e}");
    let k = c.checkpoint(&s, Some("alice"), None).await.unwrap();
    let e = c.checkpoint(&s, Some("alice"), None).await.unwrap_err();
    assert_eq!(code(&e), Some(ErrorCode::Quota), "{e}");
    assert!(e.to_string().contains("max_checkpoints"), "{e}");
    let e = c
        .restore_checkpoint(&s, Some("alice"), "ffffffffffffffffffffffffffffffff")
        .await
        .unwrap_err();
    assert_eq!(code(&e), Some(ErrorCode::NotFound), "{e}");
    let e = c
        .restore_checkpoint(&s, Some("mallory"), &k.checkpoint_id)
        .await
        .unwrap_err();
    assert_eq!(code(&e), Some(ErrorCode::NotFound), "{e}");
    let e = c
        .checkpoint(&s, Some("alice"), Some(&"l".repeat(300)))
        .await
        .unwrap_err();
    assert_eq!(code(&e), Some(ErrorCode::BadRequest), "{e}");
    assert_eq!(
        c.list_checkpoints(&s, Some("alice")).await.unwrap().len(),
        1
    );
    let r = send(&c, as_tenant("alice", &s, "print(x)")).await;
    assert_eq!(stdout(&r), "1\n");
    assert_kept(&r);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_graceful_restart_keeps_every_live_session_s_globals() {
    let mut d = Daemon::start(&live_policy(NO_POOL, ""));
    let c = d.client().await;
    let a = c.open_session(None).await.unwrap().session_id;
    let b = c.open_session(None).await.unwrap().session_id;
    run(&c, &a, STATE).await;
    run(
        &c,
        &b,
        "import collections\nseen = collections.Counter('abba')\ngen = (i for i in [1])",
    )
    .await;
    drop(c);
    d.restart_gracefully();
    let c = d.client().await;

    let r = run(&c, &a, "print(x, g(2), p.norm(), sq(3))").await;
    assert_eq!(stdout(&r), "1 2 3 9\n", "{r:?}");
    assert_state(
        &r,
        InterpreterState::Reset,
        Some(ResetReason::ServerRestarted),
    );
    assert_eq!(
        sorted(&r.interpreter.restored),
        ["Point", "g", "p", "sq", "x"]
    );
    let r = run(&c, &b, "print(seen['a'])").await;
    assert_eq!(stdout(&r), "2\n", "{r:?}");
    assert_eq!(sorted(&r.interpreter.restored), ["collections", "seen"]);
    assert_eq!(r.interpreter.not_restored.len(), 1);
    assert_eq!(r.interpreter.not_restored[0].name, "gen");
    // Restored once: the next restart after this call has nothing stale.
    let r = run(&c, &a, "print(x)").await;
    assert_kept(&r);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_global_a_full_workspace_cannot_hold_is_named_and_the_source_keeps_it() {
    let d = Daemon::start(&live_policy(NO_POOL, ""));
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap().session_id;
    // The 32 MiB workspace filled up, and a global its save cannot fit.
    let fill = "import os\nbig = os.urandom(4 << 20)\n\
                f = open('fill', 'wb')\n\
                try:\n    while True:\n        f.write(b'x' * (1 << 20)); f.flush()\n\
                except OSError:\n    pass\n";
    assert_eq!(run(&c, &s, fill).await.outcome.status, Status::Ok);
    let f = c.fork_session(&s, None, 1).await.unwrap();
    let b = &f.sessions[0];
    let why = |name: &str| {
        b.not_restored
            .iter()
            .find(|n| n.name == name)
            .map(|n| n.why.clone())
    };
    assert_eq!(
        why("big").as_deref(),
        Some("OSError: [Errno 28] No space left on device"),
        "{b:?}"
    );
    assert!(
        why("f").is_some_and(|w| w.contains("cannot pickle")),
        "{b:?}"
    );
    let r = run(
        &c,
        &b.session_id,
        "print('big' in globals(), os.path.getsize('fill') > 0)",
    )
    .await;
    assert_eq!(
        stdout(&r),
        "False True
",
        "{r:?}"
    );
    let r = run(&c, &s, "print(len(big))").await;
    assert_eq!(stdout(&r), "4194304\n", "{r:?}");
    assert_kept(&r);
}
