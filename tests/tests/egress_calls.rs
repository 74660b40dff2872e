//! The egress proxy between calls and under attack, on a real supervisor
//! with real jails: a connection lives no longer than the call that opened
//! it (a tunnel held open, a background sender, a later call that narrows
//! the list), every byte is charged to, reported in and audited for the
//! call in which it moved; and the proxy process is out of reach of every
//! uid but root's, and replaced within seconds when it hangs.

use prims_protocol::jail::Status;
use prims_protocol::wire::{RunReply, RunRequest};
use prims_tests::daemon::{run_req, Daemon};
use prims_tests::http::HttpServer;
use prims_tests::live::{send, stderr, stdout};
use prims_tests::netns::NetnsHost;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A server in a network namespace of its own that answers a request head
/// with 200, then echoes every byte and counts them.
struct Sink {
    addr: SocketAddr,
    received: Arc<AtomicU64>,
    _http: HttpServer,
    _ns: NetnsHost,
}

impl Sink {
    fn start() -> Sink {
        let ns = NetnsHost::new();
        let received = Arc::new(AtomicU64::new(0));
        let count = received.clone();
        let http = HttpServer::on(ns.listen(0), move |_, mut c| {
            let count = count.clone();
            async move {
                let mut buf = [0u8; 4096];
                if c.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await.is_err() {
                    return;
                }
                loop {
                    match c.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            count.fetch_add(n as u64, Ordering::SeqCst);
                            if c.write_all(&buf[..n]).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            }
        });
        Sink {
            addr: http.addr,
            received,
            _http: http,
            _ns: ns,
        }
    }

    fn received(&self) -> u64 {
        self.received.load(Ordering::SeqCst)
    }
}

/// The sink speaks no TLS: its tunnels are passed through, not inspected.
fn daemon(up: SocketAddr) -> Daemon {
    let (ip, port) = (up.ip(), up.port());
    let policy = format!(
        "[network]\nmode = \"allowlist\"\n\
         allow = [{{ host = \"sink.test.example:{port}\", tls = \"passthrough\" }}, \"{ip}:{port}\"]\n\
         [interpreters]\npool_size = 0\n"
    );
    Daemon::start_with_args(
        &policy,
        &["--egress-resolve", &format!("sink.test.example={ip}")],
    )
}

/// Jailed Python: `tunnel()` opens a CONNECT tunnel to the sink through
/// the proxy and sends it a request head, raising unless both answer 200.
const TUNNEL: &str = r#"
import socket, threading, time
def head(s):
    got = b""
    while b"\r\n\r\n" not in got:
        b = s.recv(1)
        if not b:
            raise ConnectionError("closed")
        got += b
    if b" 200 " not in got.split(b"\r\n")[0]:
        raise ConnectionError(got.split(b"\r\n")[0].decode())
def tunnel():
    s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
    s.sendall(b"CONNECT sink.test.example:PORT HTTP/1.1\r\nHost: sink.test.example:PORT\r\n\r\n")
    head(s)
    s.sendall(b"GET /sink HTTP/1.1\r\nHost: sink\r\n\r\n")
    head(s)
    return s
"#;

fn allowed_bytes(r: &RunReply) -> u64 {
    r.network
        .as_ref()
        .map_or(0, |n| n.allowed.iter().map(|a| a.bytes).sum())
}

fn reasons(r: &RunReply) -> Vec<String> {
    r.network
        .as_ref()
        .map(|n| n.denied.iter().map(|d| d.reason.clone()).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_connection_lives_no_longer_than_the_call_that_opened_it() {
    let sink = Sink::start();
    let d = daemon(sink.addr);
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap().session_id;
    let tunnel = TUNNEL.replace("PORT", &sink.addr.port().to_string());

    // Call 1: a tunnel kept in a global, and a thread that sends through a
    // tunnel of its own every 50 ms, reopening it when it breaks.
    let first = format!(
        "{tunnel}\n\
         held = tunnel()\n\
         held.sendall(b'a' * 100)\n\
         assert held.recv(100) == b'a' * 100\n\
         sent = {{'n': 0, 'errors': 0}}\n\
         def sender():\n\
         \x20   s = None\n\
         \x20   while True:\n\
         \x20       try:\n\
         \x20           s = s or tunnel()\n\
         \x20           s.sendall(b'b' * 10)\n\
         \x20           if s.recv(10) != b'b' * 10:\n\
         \x20               raise ConnectionError('closed')\n\
         \x20           sent['n'] += 10\n\
         \x20       except Exception:\n\
         \x20           sent['errors'] += 1\n\
         \x20           s = None\n\
         \x20       time.sleep(0.05)\n\
         threading.Thread(target=sender, daemon=True).start()\n\
         time.sleep(0.5)\n\
         print('sent', sent['n'] > 0)"
    );
    let r1 = send(&c, run_req(&s, &first)).await;
    assert_eq!(stdout(&r1), "sent True\n", "{}", stderr(&r1));
    let after_first = sink.received();
    assert!(after_first > 100, "the sink got {after_first} bytes");
    // Everything the sink got in call 1 is charged to it: each tunnel's
    // inner request head and the sink's 19-byte answer, then what it
    // echoed (an echo cut short by the call's end counts one way only).
    let tunnels: u64 = r1
        .network
        .as_ref()
        .map_or(0, |n| n.allowed.iter().map(|a| a.connections).sum());
    let heads = tunnels * ("GET /sink HTTP/1.1\r\nHost: sink\r\n\r\n".len() as u64 + 19);
    let charged = allowed_bytes(&r1);
    assert!(
        (heads + after_first..=heads + 2 * after_first).contains(&charged),
        "{charged} bytes charged for {after_first} received: {:?}",
        r1.network
    );

    // Between calls nothing moves: both tunnels were closed at its end.
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(sink.received(), after_first, "bytes moved between calls");

    // Call 2 narrows the list to nothing: the held tunnel is dead, and the
    // sender's attempts are refused and reported in this call.
    let narrowed = RunRequest {
        network: Some(vec![]),
        ..run_req(
            &s,
            "try:\n\
             \x20   held.sendall(b'c' * 100)\n\
             \x20   print('held', held.recv(100))\n\
             except OSError as e:\n\
             \x20   print('held', type(e).__name__)\n\
             time.sleep(1)",
        )
    };
    let r2 = send(&c, narrowed).await;
    let held = stdout(&r2);
    assert!(
        held == "held b''\n"
            || held == "held ConnectionResetError\n"
            || held == "held BrokenPipeError\n",
        "the held tunnel was closed: {held:?}"
    );
    assert_eq!(sink.received(), after_first, "bytes moved during call 2");
    assert_eq!(allowed_bytes(&r2), 0, "{:?}", r2.network);
    let refused = reasons(&r2);
    assert!(
        refused.iter().any(|r| r.starts_with("no call is running")),
        "the attempts between calls are in the next call's record: {refused:?}"
    );
    assert!(
        refused.iter().any(|r| r.contains("sink.test.example")),
        "the sender's attempts under the narrowed list: {refused:?}"
    );

    // Call 3 allows it again: the sender's new tunnel moves bytes, charged
    // to call 3.
    let r3 = send(&c, run_req(&s, "time.sleep(1)\nprint(sent['n'])")).await;
    assert_eq!(r3.outcome.status, Status::Ok, "{}", stderr(&r3));
    let moved = sink.received() - after_first;
    assert!(moved > 0, "the sender reconnected in call 3");
    assert!(allowed_bytes(&r3) >= moved * 2, "{:?}", r3.network);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(sink.received(), after_first + moved, "nothing after call 3");

    // The audit log charges the same bytes to the same calls: one line per
    // call with bytes, none for the time between.
    let log = std::fs::read_to_string(d.state.join("audit.log")).unwrap();
    let audited: Vec<u64> = log
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["event"] == "egress" && v["decision"] == "allowed")
        .map(|v| v["bytes"].as_u64().unwrap())
        .collect();
    assert_eq!(audited, [allowed_bytes(&r1), allowed_bytes(&r3)]);
}

/// Host pids of the daemon's egress proxy: a process named egress-proxy
/// whose parent (its launcher) is one too.
fn proxy_pid(d: &Daemon) -> Option<i32> {
    let sup = d.pid() as i32;
    let parent = |pid: i32| -> Option<i32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit(')')
            .next()?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    let named = |pid: i32| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| c.windows(12).any(|w| w == b"egress-proxy"))
    };
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<i32>().ok())
        .find(|&p| named(p) && parent(p).is_some_and(|l| named(l) && parent(l) == Some(sup)))
}

/// The errno `uid` gets sending SIGSTOP to `pid` (0 if it went through).
fn sigstop_as(uid: u32, pid: i32) -> i32 {
    let out = std::process::Command::new("setpriv")
        .args([
            &format!("--reuid={uid}"),
            &format!("--regid={uid}"),
            "--clear-groups",
            "/bin/kill",
            "-STOP",
            &pid.to_string(),
        ])
        .output()
        .expect("setpriv");
    if out.status.success() {
        0
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("Operation not permitted"), "{err}");
        libc::EPERM
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_proxy_is_out_of_reach_of_other_uids_and_replaced_when_it_hangs() {
    let sink = Sink::start();
    let d = daemon(sink.addr);
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap().session_id;
    let r = send(&c, run_req(&s, "print(1)")).await;
    assert_eq!(stdout(&r), "1\n");
    let pid = proxy_pid(&d).expect("the daemon's egress proxy");
    let account = prims_tests::egress_account();
    for uid in [65534, account.uid] {
        assert_eq!(sigstop_as(uid, pid), libc::EPERM, "kill -STOP as {uid}");
    }
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    assert!(!state.contains(") T "), "not stopped: {state}");

    // Root stops it, as a wedged process would be: it is replaced within
    // seconds, and calls go on being served.
    // SAFETY: signalling a process of this test's daemon.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    let stopped = Instant::now();
    let replaced = loop {
        if let Some(p) = proxy_pid(&d).filter(|p| *p != pid) {
            break p;
        }
        assert!(
            stopped.elapsed() < Duration::from_secs(10),
            "never replaced"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        stopped.elapsed() < Duration::from_secs(4),
        "replaced after {:?}",
        stopped.elapsed()
    );
    let tunnel = TUNNEL.replace("PORT", &sink.addr.port().to_string());
    let r = send(
        &c,
        run_req(
            &s,
            &format!("{tunnel}\nt = tunnel()\nt.sendall(b'x')\nprint(t.recv(1))"),
        ),
    )
    .await;
    assert_eq!(stdout(&r), "b'x'\n", "{}", stderr(&r));
    assert!(proxy_pid(&d) == Some(replaced));
}
