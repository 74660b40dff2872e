//! Checkpoints on a real supervisor are charged what they take of the
//! state directory's disk (a symlink farm holds no file data, yet costs a
//! block and an inode a link), refused past their inode budget with
//! nothing kept, and, without bearer tokens, budgeted per lineage: one
//! client's checkpoints leave another's first one room, while the node's
//! totals still bound them all.

use prims_protocol::client::ClientError;
use prims_protocol::jail::Status;
use prims_protocol::wire::ErrorCode;
use prims_tests::daemon::Daemon;
use prims_tests::live::*;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A cell that makes `farm/` in the workspace: `n` symlinks, each to its
/// own 1000-byte target, too long to live in the inode (60 bytes): each
/// takes a block of its own, 1 KiB in the test's small workspace image
/// (whose blocks bound a target's length), 4 KiB in a checkpoint on a
/// 4 KiB-block state directory.
fn farm(n: usize) -> String {
    format!(
        "import os\nos.mkdir('farm')\nfor i in range({n}):\n    \
         os.symlink(f'{{i:08}}' + 't' * 992, f'farm/l{{i}}')\nprint(len(os.listdir('farm')))"
    )
}

fn refusal(e: &ClientError) -> (Option<ErrorCode>, String) {
    match e {
        ClientError::Server(r) => (Some(r.code), r.message.clone()),
        e => (None, e.to_string()),
    }
}

/// Where the daemon keeps session `sid`'s checkpoints.
fn checkpoints_of(d: &Daemon, sid: &str) -> PathBuf {
    let name = d.workspace(sid).file_name().unwrap().to_owned();
    d.state.join("checkpoints").join(name)
}

/// What the tree at `p` takes, `p` included: each entry's allocated
/// blocks, at least one `block`.
fn real_cost(p: &Path, block: u64) -> (u64, u64) {
    let m = std::fs::symlink_metadata(p).unwrap();
    let (mut bytes, mut inodes) = ((m.blocks() * 512).max(block), 1);
    if m.is_dir() {
        for e in std::fs::read_dir(p).unwrap() {
            let (b, i) = real_cost(&e.unwrap().path(), block);
            bytes += b;
            inodes += i;
        }
    }
    (bytes, inodes)
}

fn branches(keys: &str) -> String {
    live_policy(NO_POOL, &format!("[branches]\n{keys}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_symlink_farm_is_charged_its_real_cost_and_refused_past_the_inode_budget() {
    let d = Daemon::start(&branches("max_checkpoint_inodes = 2000\n"));
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap().session_id;
    let r = run(&c, &s, &farm(3000)).await;
    assert_eq!(
        (r.outcome.status, stdout(&r).as_str()),
        (Status::Ok, "3000\n"),
        "{r:?}"
    );

    // 3000 links and their directory pass 2000 inodes: refused, and
    // nothing of the copy is left.
    let e = c.checkpoint(&s, None, None).await.unwrap_err();
    let (code, message) = refusal(&e);
    assert_eq!(code, Some(ErrorCode::Quota), "{message}");
    assert!(
        message.contains("inode budget") && message.contains("branches.max_checkpoint_inodes"),
        "{message}"
    );
    assert!(c.list_checkpoints(&s, None).await.unwrap().is_empty());
    let left: Vec<_> = std::fs::read_dir(checkpoints_of(&d, &s))
        .map(|r| r.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");

    // With room: kept, and charged what it takes on disk (every link a
    // block), where only the pickled globals' bytes were counted before.
    d.reload_and_wait(&branches("max_checkpoint_inodes = 4000\n"), HANG_GUARD);
    let k = c.checkpoint(&s, None, None).await.unwrap();
    assert!(k.bytes >= 3000 * 4096, "{k:?}");
    let dir = checkpoints_of(&d, &s).join(&k.checkpoint_id);
    let block = nix::sys::statvfs::statvfs(&dir).unwrap().fragment_size();
    let (bytes, inodes) = real_cost(&dir, block);
    assert_eq!(
        k.bytes, bytes,
        "charged {k:?}, takes {bytes} in {inodes} inodes"
    );
    assert!(inodes > 3000, "{inodes}");

    // What is left of 4000 inodes cannot hold a second one.
    let e = c.checkpoint(&s, None, None).await.unwrap_err();
    let (code, message) = refusal(&e);
    assert_eq!(code, Some(ErrorCode::Quota), "{message}");
    assert!(
        message.contains("branches.max_checkpoint_inodes"),
        "{message}"
    );
    assert_eq!(c.list_checkpoints(&s, None).await.unwrap().len(), 1);
    let r = run(&c, &s, "print(len(os.listdir('farm')))").await;
    assert_eq!(stdout(&r), "3000\n", "the session goes on: {r:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn without_tokens_one_lineage_filling_its_budget_leaves_others_room() {
    // The tenant budgets allow 2 checkpoints; the node 120 inodes.
    let d = Daemon::start(&branches(
        "max_checkpoints = 2\nmax_checkpoints_per_tenant = 2\n\
         max_checkpoint_inodes = 100\nmax_checkpoint_inodes_per_tenant = 120\n\
         max_checkpoint_inodes_total = 120\n",
    ));
    let c = d.client().await;

    // One client: a session, a branch of it, a checkpoint of each (some
    // 40 inodes apiece). Its lineage's budget is full.
    let src = c.open_session(None).await.unwrap().session_id;
    assert_eq!(stdout(&run(&c, &src, &farm(30)).await), "30\n");
    let branch = c.fork_session(&src, None, 1).await.unwrap().sessions[0]
        .session_id
        .clone();
    c.checkpoint(&src, None, None).await.unwrap();
    c.checkpoint(&branch, None, None).await.unwrap();
    let e = c.checkpoint(&src, None, None).await.unwrap_err();
    let (code, message) = refusal(&e);
    assert_eq!(code, Some(ErrorCode::Quota), "{message}");
    assert!(
        message.contains("lineage") && message.contains("branches.max_checkpoints_per_tenant"),
        "{message}"
    );

    // Another client, the same (absent) tenant: its first checkpoint is
    // accepted, where the tenant's 2 used to refuse it.
    let other = c.open_session(None).await.unwrap().session_id;
    run(&c, &other, "x = 1").await;
    let k = c.checkpoint(&other, None, None).await.unwrap();
    assert!(k.bytes > 0, "{k:?}");

    // The node's total still bounds every lineage together: a third
    // client's checkpoint of some 70 inodes fits its own budgets, not the
    // node's.
    let third = c.open_session(None).await.unwrap().session_id;
    assert_eq!(stdout(&run(&c, &third, &farm(60)).await), "60\n");
    let e = c.checkpoint(&third, None, None).await.unwrap_err();
    let (code, message) = refusal(&e);
    assert_eq!(code, Some(ErrorCode::Quota), "{message}");
    assert!(
        message.contains("branches.max_checkpoint_inodes_total"),
        "{message}"
    );
    assert!(c.list_checkpoints(&third, None).await.unwrap().is_empty());
}
