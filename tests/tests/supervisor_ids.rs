//! Session ids are capabilities: with a live session, a run in flight and
//! an audit log, another local user searches everything it can read for
//! the id and finds nothing; and jailed code sees no host path of the
//! state directory in its mount table.

use prims_protocol::wire::RunReply;
use prims_tests::daemon::{run_req, Daemon};
use prims_tests::{processes_with_marker, unique};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::{Duration, Instant};

/// A uid no account and no PRIMS range uses.
const STRANGER: u32 = 4245;

/// What an unprivileged user can read that might name a session: every
/// process's mount table and command line, the loop devices' backing
/// files, the state directory (listing it), the audit log and the
/// sessions directory. Prints the id wherever it is found, and what it
/// could not read.
const SEARCH: &str = r#"
import glob, os, sys
state = sys.argv[1]
sid = sys.stdin.read().strip()
me = "/proc/%d/" % os.getpid()
found, read, denied = [], 0, []
def look(path, data):
    global read
    read += 1
    if sid in data:
        found.append(path)
paths = glob.glob("/proc/[0-9]*/mountinfo") + glob.glob("/proc/[0-9]*/cmdline") \
    + glob.glob("/proc/[0-9]*/environ") + glob.glob("/sys/block/loop*/loop/backing_file") \
    + ["/proc/self/mountinfo", state + "/audit.log", state + "/session.key"]
for p in paths:
    if p.startswith(me):
        continue
    try:
        with open(p, "rb") as f:
            look(p, f.read().decode("latin-1"))
    except OSError as e:
        if p.startswith(state):
            denied.append("%s:%s" % (os.path.basename(p), e.errno))
for d in [state, state + "/sessions"]:
    try:
        look(d, " ".join(os.listdir(d)))
    except OSError as e:
        denied.append("%s:%s" % (os.path.basename(d), e.errno))
print("uid", os.getuid(), "read", read, "found", found, "denied", sorted(denied))
"#;

fn search_as_stranger(session_id: &str, state: &std::path::Path) -> String {
    let mut cmd = Command::new("/usr/bin/python3");
    // The id goes in on stdin: in argv, this search itself would show it.
    cmd.args(["-I", "-c", SEARCH])
        .arg(state)
        .env_clear()
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    // SAFETY: only async-signal-safe credential calls before exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setresgid(STRANGER, STRANGER, STRANGER) != 0
                || libc::setresuid(STRANGER, STRANGER, STRANGER) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("running the search");
    use std::io::Write;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(session_id.as_bytes())
        .expect("writing the id");
    let out = child.wait_with_output().expect("the search");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn another_local_user_finds_no_live_session_id() {
    let d = Daemon::start("");
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap();
    let id = s.session_id.clone();
    // A finished run (the audit log has a line) and one in flight (its
    // jail's processes are on the host).
    let done: RunReply = c
        .run(run_req(&id, "open('output/a.txt','w').write('a')"), |_| {})
        .await
        .unwrap();
    assert_eq!(done.outcome.status, prims_protocol::jail::Status::Ok);
    let marker = unique("idleak");
    let c2 = d.client().await;
    let id2 = id.clone();
    let marker2 = marker.clone();
    let running = tokio::spawn(async move {
        c2.run(
            // The interpreter's command line is the agent's: a child of the
            // code carries the marker in its own.
            run_req(
                &id2,
                &format!("import subprocess, time\nsubprocess.Popen(['sh', '-c', 'sleep 8 # {marker2}'])\ntime.sleep(8)"),
            ),
            |_| {},
        )
        .await
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while processes_with_marker(&marker).is_empty() {
        assert!(Instant::now() < deadline, "the run never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let report = search_as_stranger(&id, &d.state);
    eprintln!("{report}");
    assert!(report.starts_with(&format!("uid {STRANGER} ")), "{report}");
    assert!(report.contains("found []"), "the id leaked: {report}");
    let read: u64 = report
        .split_whitespace()
        .nth(3)
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(read > 20, "the search read almost nothing: {report}");
    for private in ["audit.log:13", "session.key:13", "sessions:13", "state:13"] {
        assert!(report.contains(private), "{private} was readable: {report}");
    }
    // Root can read the audit log: it names the session by its name only.
    let log = std::fs::read_to_string(d.state.join("audit.log")).unwrap();
    let name = d.workspace(&id);
    let name = name.file_name().unwrap().to_string_lossy().into_owned();
    assert!(log.contains(&name) && !log.contains(&id), "{log}");
    let mode = std::fs::metadata(d.state.join("audit.log")).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
        0o600
    );
    running.abort();
}

#[tokio::test(flavor = "multi_thread")]
async fn jailed_code_sees_no_host_path_of_the_state_directory() {
    let d = Daemon::start("");
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap();
    // python's mount table, then what the jail's init (pid 1, the jailer)
    // shows of itself: its mount table and its command line.
    let reply: RunReply = c
        .run(
            run_req(
                &s.session_id,
                "print(open('/proc/self/mountinfo').read())\n\
                 print(open('/proc/1/mountinfo').read())\n\
                 print(open('/proc/1/cmdline', 'rb').read())",
            ),
            |_| {},
        )
        .await
        .unwrap();
    let seen = String::from_utf8_lossy(&reply.stdout).into_owned();
    assert!(seen.contains(" /venv "), "{seen}");
    assert!(seen.contains(" /workspace "), "{seen}");
    let state = d.state.display().to_string();
    assert!(
        !seen.contains(&state),
        "the jail's mount tables show the state directory {state}:\n{seen}"
    );
    assert!(!seen.contains(&s.session_id), "{seen}");
    let jailer = prims_tests::jailer_bin();
    let jailer_dir = jailer.parent().expect("the jailer's directory");
    assert!(
        !seen.contains(&jailer_dir.display().to_string()),
        "the init shows the jailer's host directory {}:\n{seen}",
        jailer_dir.display()
    );
    assert!(
        seen.ends_with("b'prims-jailer\\x00--spec-fd\\x003\\x00--outcome-fd\\x004\\x00--channel-fd\\x006\\x00'\n"),
        "the init's command line is the bare program name and its fds:\n{seen}"
    );
}
