//! The jailer's `--channel-fd`: one end of a socket pair reaches python,
//! and only python, as its fd 3. The jailer and the jail's init keep no
//! copy, so the other end reads EOF once python is gone; python may make
//! it close-on-exec so its children never see it; and without the flag,
//! python has no fd 3 at all. And python starts with every signal at its
//! default, so the supervisor's SIGINT reaches it whatever the supervisor
//! inherited.

use prims_protocol::jail::{JobSpec, NetworkMode, Outcome, Status};
use prims_supervisor::job::{Cancel, Jails, JobNames, Parents};
use prims_tests::jail_spec::{no_cgroup, JailFiles, Lines};
use prims_tests::*;
use std::io::{Read, Seek, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

const HOST_UID: u32 = 202_100;
const WALL_MS: u64 = 60_000;

/// The fds python has (the listing's own fd, the lowest free one, among
/// them), and fd 3's kind.
const FDS_PY: &str = r#"
import os, stat
print('listdir', *sorted(os.listdir('/proc/self/fd'), key=int))
try:
    print('fd3', 'socket' if stat.S_ISSOCK(os.fstat(3).st_mode) else 'other',
          'inheritable' if os.get_inheritable(3) else 'cloexec',
          'blocking' if os.get_blocking(3) else 'nonblocking')
except OSError as e:
    print('fd3', 'errno', e.errno)
"#;

fn jails() -> Jails {
    Jails {
        jailer: jailer_bin(),
        parents: Parents::none(),
        names: JobNames::of_process(),
        trust: None,
    }
}

/// python's stdout, by the first word of each line.
fn fields(stdout: &str, key: &str) -> Option<String> {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' '))
        .map(str::to_string)
}

/// Each `(key, value)` is a line of `stdout`; `case` names the run.
fn assert_fields(case: &str, stdout: &str, expected: &[(&str, &str)]) {
    for (key, value) in expected {
        assert_eq!(
            fields(stdout, key).as_deref(),
            Some(*value),
            "{case}, {key}: {stdout}"
        );
    }
}

/// How a spawned jail running `code` ended: its stdout, what python sent
/// on the channel up to EOF, and the outcome.
struct Ended {
    stdout: String,
    channel: Vec<u8>,
    outcome: Outcome,
}

fn spawn_to_the_end(code: &str) -> Ended {
    let files = JailFiles::new(HOST_UID);
    let (mut ours, theirs) = UnixStream::pair().unwrap();
    // Non-blocking, as tokio makes its pairs: python must not notice.
    theirs.set_nonblocking(true).unwrap();
    let mut jail = jails()
        .spawn(
            &files.spec(code, no_cgroup("chan"), WALL_MS),
            theirs.into(),
            None,
            None,
        )
        .expect("spawn");
    let mut stdout = String::new();
    std::fs::File::from(jail.take_stdout().unwrap())
        .read_to_string(&mut stdout)
        .unwrap();
    let mut channel = Vec::new();
    ours.read_to_end(&mut channel).unwrap();
    let outcome = jail.wait();
    Ended {
        stdout,
        channel,
        outcome,
    }
}

/// `socket:[inode]`, as /proc shows an fd of `s`.
fn socket_link(s: &UnixStream) -> String {
    let ino = std::fs::metadata(format!("/proc/self/fd/{}", s.as_raw_fd()))
        .expect("stat of our socket")
        .ino();
    format!("socket:[{ino}]")
}

/// The fds of `pid` that point at `link`.
fn fds_pointing_at(pid: i32, link: &str) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap_or_else(|e| panic!("listing the fds of {pid}: {e}"))
        .flatten()
        .filter(|e| std::fs::read_link(e.path()).is_ok_and(|l| l.to_str() == Some(link)))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

fn only_child(pid: i32) -> i32 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .expect("children of a process");
    let pids: Vec<i32> = text
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 1, "children of {pid}: {pids:?}");
    pids[0]
}

#[test]
fn python_has_the_channel_as_fd_3_and_nothing_else() {
    require_root();
    let end = spawn_to_the_end(&format!("{FDS_PY}\nos.write(3, b'hello from the jail')\n"));
    assert_eq!(end.outcome.status, Status::Ok, "{:?}", end.outcome);
    // EOF right after the bytes: nobody else held the jail's end.
    assert_eq!(end.channel, b"hello from the jail");
    // A socket, inheritable (not close-on-exec) as exec left it, and
    // blocking though the end we handed over was not.
    assert_fields(
        "spawned",
        &end.stdout,
        &[
            ("listdir", "0 1 2 3 4"),
            ("fd3", "socket inheritable blocking"),
        ],
    );
}

#[test]
fn without_a_channel_python_has_no_fd_3() {
    require_root();
    let files = JailFiles::new(HOST_UID);
    let r = jails()
        .run(
            &files.spec(FDS_PY, no_cgroup("chan"), WALL_MS),
            &|_, _| {},
            &Cancel::default(),
            None,
        )
        .expect("run");
    let stdout = String::from_utf8_lossy(&r.stdout);
    assert_eq!(r.outcome.status, Status::Ok, "{r:?}");
    let ebadf = format!("errno {}", libc::EBADF);
    assert_fields("run", &stdout, &[("listdir", "0 1 2 3"), ("fd3", &ebadf)]);
}

#[test]
fn a_child_of_python_sees_the_channel_only_until_python_makes_it_cloexec() {
    require_root();
    let code = r#"
import os, subprocess, sys
PROBE = '''
import os, stat
try:
    print('socket' if stat.S_ISSOCK(os.fstat(3).st_mode) else 'other')
except OSError as e:
    print('errno', e.errno)
'''
def child():
    return subprocess.run([sys.executable, '-I', '-c', PROBE], close_fds=False,
                          capture_output=True, text=True).stdout.strip()
print('inheritable', child())
os.set_inheritable(3, False)
print('cloexec', child())
"#;
    let end = spawn_to_the_end(code);
    assert_eq!(end.outcome.status, Status::Ok, "{:?}", end.outcome);
    // Pair: left inheritable, the channel does reach a child.
    let ebadf = format!("errno {}", libc::EBADF);
    assert_fields(
        "spawned",
        &end.stdout,
        &[("inheritable", "socket"), ("cloexec", &ebadf)],
    );
}

#[test]
fn the_jailer_and_the_init_keep_no_copy_of_the_channel() {
    require_root();
    let files = JailFiles::new(HOST_UID);
    // Hold python until the channel closes.
    let code = "import os\nos.write(3, b'ready\\n')\nwhile os.read(3, 4096):\n    pass\n";
    let (ours, theirs) = UnixStream::pair().unwrap();
    let link = socket_link(&theirs);
    let jail = jails()
        .spawn(
            &files.spec(code, no_cgroup("chan"), WALL_MS),
            theirs.into(),
            None,
            None,
        )
        .expect("spawn");
    let mut lines = Lines::new(ours.try_clone().unwrap());
    assert_eq!(lines.next_line().as_deref(), Some("ready"));
    let init = only_child(jail.pid());
    let python = only_child(init);
    assert_eq!(fds_pointing_at(jail.pid(), &link), Vec::<String>::new());
    assert_eq!(fds_pointing_at(init, &link), Vec::<String>::new());
    assert_eq!(fds_pointing_at(python, &link), ["3"]);
    // Closing our end ends python's loop, and with it the jail.
    drop(lines);
    ours.shutdown(std::net::Shutdown::Both).unwrap();
    drop(ours);
    let outcome = jail.wait();
    assert_eq!(outcome.status, Status::Ok, "{outcome:?}");
}

#[test]
fn the_supervisor_end_reads_eof_once_python_exits() {
    require_root();
    // python exits at once without touching the channel.
    let end = spawn_to_the_end("import sys; sys.exit(3)");
    assert!(end.channel.is_empty(), "{:?}", end.channel);
    assert_eq!(
        (end.outcome.status, end.outcome.exit_code),
        (Status::Exit, Some(3)),
        "{:?}",
        end.outcome
    );
}

/// The jailer run by hand with `fds`: (flag, fd number in the jailer, fd);
/// with `deaf`, it starts with SIGINT and SIGHUP ignored and SIGINT and
/// SIGTERM blocked, as under `nohup` or in a background shell job.
fn jailer_with(fds: Vec<(&str, i32, OwnedFd)>, deaf: bool) -> RawOutput {
    let mut cmd = Command::new(jailer_bin());
    for (flag, n, _) in &fds {
        cmd.arg(flag).arg(n.to_string());
    }
    let pairs: Vec<(i32, i32)> = fds.iter().map(|(_, n, fd)| (fd.as_raw_fd(), *n)).collect();
    // SAFETY: only fcntl, dup2, signal and the sigset calls, which are
    // async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            if deaf {
                libc::signal(libc::SIGINT, libc::SIG_IGN);
                libc::signal(libc::SIGHUP, libc::SIG_IGN);
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, libc::SIGINT);
                libc::sigaddset(&mut set, libc::SIGTERM);
                libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            }
            // Every source out of the targets' way first, then onto them.
            let mut high = Vec::new();
            for (src, dst) in &pairs {
                let h = libc::fcntl(*src, libc::F_DUPFD_CLOEXEC, 100);
                if h < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                high.push((h, *dst));
            }
            for (h, dst) in high {
                if libc::dup2(h, dst) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let out = run_with_timeout(cmd, HARD_TIMEOUT);
    // Our copies stay open until the jailer is done with its own.
    drop(fds);
    out
}

/// A spec file to read and an outcome file to write, for [`jailer_with`].
fn spec_and_outcome(spec: &JobSpec) -> (OwnedFd, OwnedFd, tempfile::NamedTempFile) {
    let mut spec_file = tempfile::tempfile().unwrap();
    spec_file
        .write_all(&serde_json::to_vec(spec).unwrap())
        .unwrap();
    spec_file.rewind().unwrap();
    let outcome = tempfile::NamedTempFile::new().unwrap();
    let out_fd = outcome.reopen().unwrap();
    (spec_file.into(), out_fd.into(), outcome)
}

#[test]
fn the_channel_lands_on_3_from_any_fd_number() {
    require_root();
    let files = JailFiles::new(HOST_UID);
    let code = format!("{FDS_PY}\nos.write(3, b'on 3')\n");
    // (spec, outcome, channel, proxy) fd numbers in the jailer.
    for (spec_n, out_n, chan_n, proxy_n) in [
        (4, 5, 3, None),
        (3, 5, 4, None),
        (5, 6, 4, Some(3)),
        (3, 4, 200, None),
    ] {
        let mut spec = files.spec(&code, no_cgroup("chan"), WALL_MS);
        if proxy_n.is_some() {
            spec.network = NetworkMode::Proxy;
            spec.proxy_port = 3128;
        }
        let (spec_fd, out_fd, outcome_file) = spec_and_outcome(&spec);
        let (mut ours, theirs) = UnixStream::pair().unwrap();
        let (proxy_ours, proxy_theirs) = UnixStream::pair().unwrap();
        let mut fds = vec![
            ("--spec-fd", spec_n, spec_fd),
            ("--outcome-fd", out_n, out_fd),
            ("--channel-fd", chan_n, theirs.into()),
        ];
        if let Some(n) = proxy_n {
            fds.push(("--proxy-fd", n, proxy_theirs.into()));
        }
        let raw = jailer_with(fds, false);
        let case = format!("spec {spec_n}, outcome {out_n}, channel {chan_n}, proxy {proxy_n:?}");
        // A hang guard: the jailer is done, so EOF is already there.
        ours.set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let mut got = Vec::new();
        ours.read_to_end(&mut got).unwrap();
        drop(proxy_ours);
        let outcome: serde_json::Value =
            serde_json::from_slice(&std::fs::read(outcome_file.path()).unwrap())
                .unwrap_or_else(|e| panic!("{case}: no outcome ({e})\n{}", raw.describe()));
        let stdout = raw.stdout_str();
        assert_eq!(
            outcome["status"],
            "ok",
            "{case}: {outcome}\n{}",
            raw.describe()
        );
        assert_eq!(got, b"on 3", "{case}");
        assert_fields(
            &case,
            &stdout,
            &[
                ("listdir", "0 1 2 3 4"),
                ("fd3", "socket inheritable blocking"),
            ],
        );
    }
}

#[test]
fn python_starts_with_default_signals_whatever_the_jailer_inherited() {
    require_root();
    let files = JailFiles::new(HOST_UID);
    let code = r#"
import signal
print('sigint', signal.getsignal(signal.SIGINT) is signal.default_int_handler)
print('sighup', signal.getsignal(signal.SIGHUP) == signal.SIG_DFL)
print('blocked', sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])))
"#;
    for deaf in [false, true] {
        let spec = files.spec(code, no_cgroup("chan"), WALL_MS);
        let (spec_fd, out_fd, _outcome) = spec_and_outcome(&spec);
        let raw = jailer_with(
            vec![("--spec-fd", 3, spec_fd), ("--outcome-fd", 4, out_fd)],
            deaf,
        );
        assert_fields(
            &format!("deaf {deaf}"),
            &raw.stdout_str(),
            &[("sigint", "True"), ("sighup", "True"), ("blocked", "[]")],
        );
    }
}
