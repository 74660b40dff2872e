//! Output is cut into cells at the file-descriptor level: subprocesses'
//! output lands in the cell that ran them, and a cell that breaks its own
//! stdout does not break the next one.

use super::harness::{Live, FIND_CHANNEL};
use crate::interpreters::channel::CellStatus;

#[tokio::test]
async fn subprocess_output_arrives_before_the_marker_of_its_cell() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = Live::start(dir.path()).await;
    let run = a
        .cell("import os\nos.system('echo sub')\nprint('after')")
        .await;
    assert_eq!(run.stdout, "sub\nafter\n");
    let code = "import subprocess\np = subprocess.run(['sh', '-c', 'echo child; echo oops >&2'])";
    let run = a.cell(code).await;
    assert_eq!(
        (run.stdout.as_str(), run.stderr.as_str()),
        ("child\n", "oops\n")
    );
    let run = a.cell("print('next')").await;
    assert_eq!((run.stdout.as_str(), run.stderr.as_str()), ("next\n", ""));
}

#[tokio::test]
async fn stderr_is_cut_at_its_own_marker() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = Live::start(dir.path()).await;
    let run = a
        .cell("import sys\nprint('e1', file=sys.stderr)\nprint('o1')")
        .await;
    assert_eq!((run.stdout.as_str(), run.stderr.as_str()), ("o1\n", "e1\n"));
    let run = a.cell("sys.stderr.write('e2')\nNone").await;
    assert_eq!((run.stdout.as_str(), run.stderr.as_str()), ("", "e2"));
    let run = a.cell("print('o3')").await;
    assert_eq!((run.stdout.as_str(), run.stderr.as_str()), ("o3\n", ""));
}

#[tokio::test]
async fn a_cell_that_closes_or_redirects_its_stdout_leaves_the_next_cell_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = Live::start(dir.path()).await;
    let run = a
        .cell("import os, sys\nprint('last words')\nos.close(1)")
        .await;
    assert_eq!(
        (run.done.status, run.stdout.as_str()),
        (CellStatus::Ok, "last words\n")
    );
    assert_eq!(a.cell("print('back')").await.stdout, "back\n");

    let redirect =
        "fd = os.open(os.devnull, os.O_WRONLY)\nos.dup2(fd, 1)\nos.dup2(fd, 2)\nprint('lost')";
    let run = a.cell(redirect).await;
    assert_eq!((run.stdout.as_str(), run.stderr.as_str()), ("", ""));
    assert_eq!(a.cell("print('back again')").await.stdout, "back again\n");

    let run = a.cell("sys.stdout.close()\nsys.stderr.close()").await;
    assert_eq!(run.done.status, CellStatus::Ok);
    let run = a
        .cell("print('reopened')\nprint('too', file=sys.stderr)")
        .await;
    assert_eq!(
        (run.stdout.as_str(), run.stderr.as_str()),
        ("reopened\n", "too\n")
    );
}

#[tokio::test]
async fn neither_a_subprocess_nor_a_fork_inherits_the_channel() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = Live::start(dir.path()).await;
    // The agent itself holds one socket: the channel.
    let found = format!("{FIND_CHANNEL}\nchan is not None");
    assert_eq!(a.ok(&found).await.as_deref(), Some("True"));
    let list_fds = "import os\ndef link(f):\n    try:\n        return os.readlink('/proc/self/fd/' + f)\n    except OSError:\n        return None\nprint(sorted(filter(None, map(link, os.listdir('/proc/self/fd')))))";
    // close_fds=False, as os.system and plain fork+exec do: only
    // close-on-exec keeps the channel out.
    let child = format!(
        "import subprocess, sys\nsubprocess.run([sys.executable, '-c', {list_fds:?}], close_fds=False)"
    );
    let run = a.cell(&child).await;
    assert!(run.stdout.starts_with('['), "{}", run.stdout);
    assert!(!run.stdout.contains("socket:"), "{}", run.stdout);
    let fork = format!(
        "import os\npid = os.fork()\nif pid == 0:\n    {FIND}\n    print('child sees', _channel(), flush=True)\n    os._exit(0)\nos.waitpid(pid, 0)[1]",
        FIND = FIND_CHANNEL.trim().replace('\n', "\n    ")
    );
    let run = a.cell(&fork).await;
    assert_eq!(run.done.result.as_deref(), Some("0"), "{run:?}");
    assert_eq!(run.stdout, "child sees None\n");
}

#[tokio::test]
async fn a_forked_child_that_runs_on_into_the_agent_leaves_without_a_word() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = Live::start(dir.path()).await;
    // The child does not _exit: it finishes the cell and returns into the
    // agent's loop, where it must neither answer nor write markers.
    let fork = "import os\npid = os.fork()\nstatus = os.waitpid(pid, 0)[1] if pid else None\n'parent' if pid else 'child'";
    let run = a.cell(fork).await;
    assert_eq!(run.done.result.as_deref(), Some("'parent'"));
    assert_eq!((run.stdout.as_str(), run.stderr.as_str()), ("", ""));
    let lost = crate::interpreters::agent::CHANNEL_LOST_EXIT.to_string();
    assert_eq!(
        a.ok("os.WEXITSTATUS(status)").await.as_deref(),
        Some(lost.as_str())
    );
    assert_eq!(a.ok("'still here'").await.as_deref(), Some("'still here'"));
}

#[tokio::test]
async fn a_flood_is_cut_at_its_marker_and_capped_by_the_reader() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = Live::start(dir.path()).await;
    a.send_cell("import sys\nfor _ in range(2048):\n    sys.stdout.write('x' * 1023 + '\\n')")
        .await;
    assert_eq!(a.done().await.status, CellStatus::Ok);
    let marker = a.mark().await;
    let mut kept = crate::interpreters::output::Capped::new(64 * 1024);
    let flood = a.stdout.until(&marker).await;
    let first = kept.push(&flood).len();
    assert_eq!((flood.len(), first), (2 * 1024 * 1024, 64 * 1024));
    assert!(flood.iter().all(|&b| b == b'x' || b == b'\n'));
    assert_eq!((kept.seen(), kept.truncated()), (2 * 1024 * 1024, true));
    assert!(a.stderr.until(&marker).await.is_empty());
    assert_eq!(a.cell("print('calm')").await.stdout, "calm\n");
}
