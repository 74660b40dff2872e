//! Helpers for the live-interpreter tests (`tests/tests/live_*.rs`): runs
//! in a session of a real supervisor that return the whole reply, requests
//! with `fresh`, limits or requirements, the interpreter's state, waits on
//! the supervisor's figures, and a look at what sits unread in a jail's
//! output pipe.

use prims_protocol::client::Client;
use prims_protocol::jail::LimitRequest;
use prims_protocol::wire::{
    Event, InterpreterState, OutputStream, ResetReason, RunReply, RunRequest, Stats,
};
use std::time::{Duration, Instant};

/// `[interpreters]` keys for a supervisor without a warm pool, so every
/// session's first interpreter starts (forked from the default
/// environment's template, as the server does by default) when its first
/// call comes, and the host stays quiet.
pub const NO_POOL: &str = "pool_size = 0\n";

/// Policy for a live-interpreter test daemon: the `[interpreters]` keys
/// `interpreters`, small session workspaces (these tests need little disk,
/// and a shared build host may have little free), then `extra` (sections
/// other than `[interpreters]`, `[sessions]` and the daemon's own).
pub fn live_policy(interpreters: &str, extra: &str) -> String {
    format!(
        "[interpreters]\n{interpreters}\n\
         [sessions]\ndisk_quota = \"32MiB\"\nmin_free_disk = \"256MiB\"\n{extra}"
    )
}

/// `[interpreters]` keys for a supervisor without a warm pool or fork
/// templates: every interpreter starts cold, the server's fallback.
pub const COLD: &str = "pool_size = 0\nfork_templates = false\n";

/// How long a wait on the supervisor may take before the test calls it a
/// hang; never a measure of speed.
pub const HANG_GUARD: Duration = Duration::from_secs(60);

/// Python that prints the jail's process ids, sorted, on one line.
pub const JAIL_PIDS: &str =
    "print(*sorted(int(p) for p in __import__('os').listdir('/proc') if p.isdigit()))";

/// Runs `req` and returns its reply; any error fails the test.
pub async fn send(c: &Client, req: RunRequest) -> RunReply {
    let what = format!("{:?}", req.code);
    c.run(req, |_| {})
        .await
        .unwrap_or_else(|e| panic!("the run of {what} failed: {e}"))
}

/// Runs `req` and returns its reply and the stdout streamed as events.
pub async fn send_streamed(c: &Client, req: RunRequest) -> (RunReply, Vec<u8>) {
    let what = format!("{:?}", req.code);
    let mut streamed = Vec::new();
    let reply = c
        .run(req, |ev| {
            if let Event::Output {
                stream: OutputStream::Stdout,
                data,
            } = ev
            {
                streamed.extend(data);
            }
        })
        .await
        .unwrap_or_else(|e| panic!("the run of {what} failed: {e}"));
    (reply, streamed)
}

/// Runs `code` as the next cell of session `sid`.
pub async fn run(c: &Client, sid: &str, code: &str) -> RunReply {
    send(c, crate::daemon::run_req(sid, code)).await
}

/// A run of `code` that asks for a fresh interpreter.
pub fn fresh(sid: &str, code: &str) -> RunRequest {
    RunRequest {
        fresh: true,
        network: None,
        ..crate::daemon::run_req(sid, code)
    }
}

/// A run of `code` with the limits `set` makes.
pub fn limited(sid: &str, code: &str, set: impl FnOnce(&mut LimitRequest)) -> RunRequest {
    let mut req = crate::daemon::run_req(sid, code);
    set(&mut req.limits);
    req
}

/// A run of `code` with pip `requirements`.
pub fn requiring(sid: &str, code: &str, requirements: &[&str]) -> RunRequest {
    RunRequest {
        requirements: requirements.iter().map(|r| r.to_string()).collect(),
        ..crate::daemon::run_req(sid, code)
    }
}

pub fn stdout(r: &RunReply) -> String {
    String::from_utf8_lossy(&r.stdout).into_owned()
}

pub fn stderr(r: &RunReply) -> String {
    String::from_utf8_lossy(&r.stderr).into_owned()
}

/// The run's stderr ends with `tail` (a traceback's last line).
#[track_caller]
pub fn assert_stderr_ends_with(r: &RunReply, tail: &str) {
    assert!(stderr(r).ends_with(tail), "stderr: {}\n{r:?}", stderr(r));
}

/// The run's interpreter was in `state` for `reason`.
#[track_caller]
pub fn assert_state(r: &RunReply, state: InterpreterState, reason: Option<ResetReason>) {
    assert_eq!(
        (r.interpreter.state, r.interpreter.reason),
        (state, reason),
        "interpreter state; the reply: status {:?}, stdout {:?}, stderr {:?}, {:?}",
        r.outcome.status,
        stdout(r),
        stderr(r),
        r.interpreter
    );
}

/// The interpreter of the previous run served this one.
#[track_caller]
pub fn assert_kept(r: &RunReply) {
    assert_state(r, InterpreterState::Kept, None);
}

/// A new interpreter replaced the previous one for `reason`.
#[track_caller]
pub fn assert_reset(r: &RunReply, reason: ResetReason) {
    assert_state(r, InterpreterState::Reset, Some(reason));
}

/// Polls the supervisor's figures until `ok` holds; fails after
/// [`HANG_GUARD`] with the last figures and `what` was awaited.
pub async fn wait_for_stats(c: &Client, what: &str, ok: impl Fn(&Stats) -> bool) -> Stats {
    let deadline = Instant::now() + HANG_GUARD;
    loop {
        let s = c.stats().await.expect("stats");
        if ok(&s) {
            return s;
        }
        assert!(Instant::now() < deadline, "never saw {what}: {s:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Bytes written to the pipe at `fd` of host process `pid` and not read
/// yet by whoever holds its read end (FIONREAD on a new read end opened
/// through `/proc`, which reads nothing itself).
pub fn pipe_unread(pid: i32, fd: i32) -> std::io::Result<usize> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let pipe = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(format!("/proc/{pid}/fd/{fd}"))?;
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one c_int through a valid pointer; the fd is
    // open for the whole call.
    if unsafe { libc::ioctl(pipe.as_raw_fd(), libc::FIONREAD, &mut n) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(usize::try_from(n).unwrap_or(0))
}

/// Waits until the supervisor has read everything host process `pid`
/// wrote to its stdout pipe.
pub fn wait_stdout_read(pid: i32) {
    let deadline = Instant::now() + HANG_GUARD;
    loop {
        match pipe_unread(pid, 1) {
            Ok(0) => return,
            Ok(n) => assert!(
                Instant::now() < deadline,
                "{n} bytes stayed unread in the stdout pipe of {pid}"
            ),
            Err(e) => panic!("FIONREAD on the stdout of {pid}: {e}"),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until file `name` exists in directory `dir` (a workspace, seen
/// from the host).
pub fn wait_for_file(dir: &std::path::Path, name: &str) {
    let deadline = Instant::now() + HANG_GUARD;
    while !dir.join(name).exists() {
        assert!(
            Instant::now() < deadline,
            "{name} never appeared in {}",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Writes and lists where a jail might be able to, and prints what
/// confines it: the same text for a pooled and a cold interpreter. Only
/// the workspace, `/tmp` and the harmless devices take writes; the
/// read-only mounts answer EROFS; `/proc/self/comm`, which the mount and
/// the file's owner would allow, is Landlock's EACCES. The root lists (as
/// `ls /` does in a notebook), and holds only mount points (and links to
/// them) beside the jailer's `/etc`: no workspace but the session's.
pub const CONFINEMENT: &str = r#"import errno, os
def attempt(path):
    try:
        with open(path, 'w') as f:
            f.write('x')
        return 'ok'
    except OSError as e:
        return errno.errorcode[e.errno]
for p in ('/workspace/w.txt', '/tmp/t.txt', '/x.txt', '/usr/x.txt', '/venv/x.txt',
          '/etc/x.txt', '/etc/passwd', '/dev/zero', '/dev/null', '/proc/self/comm'):
    print(p, attempt(p))
def listing(path):
    try:
        return sorted(os.listdir(path))
    except OSError as e:
        return errno.errorcode[e.errno]
def root(path):
    names = listing(path)
    if isinstance(names, str):
        return names
    plain = [n for n in names if n != 'etc' and not os.path.ismount(os.path.join(path, n))
             and not os.path.islink(os.path.join(path, n))]
    return 'workspace' in names, plain
for p in ('/', '/workspace/..'):
    print(p, root(p))
for p in ('/workspace', '/tmp'):
    print(p, listing(p))
for line in open('/proc/self/status'):
    k, _, v = line.partition(':')
    if k in ('NoNewPrivs', 'Seccomp', 'CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb'):
        print(k, v.strip())
"#;

pub const CONFINED: &str = "/workspace/w.txt ok\n\
/tmp/t.txt ok\n\
/x.txt EROFS\n\
/usr/x.txt EROFS\n\
/venv/x.txt EROFS\n\
/etc/x.txt EROFS\n\
/etc/passwd EROFS\n\
/dev/zero ok\n\
/dev/null ok\n\
/proc/self/comm EACCES\n\
/ (True, [])\n\
/workspace/.. (True, [])\n\
/workspace ['mounts', 'output', 'w.txt']\n\
/tmp ['.prims', 't.txt']\n\
CapInh 0000000000000000\n\
CapPrm 0000000000000000\n\
CapEff 0000000000000000\n\
CapBnd 0000000000000000\n\
CapAmb 0000000000000000\n\
NoNewPrivs 1\n\
Seccomp 2\n";
