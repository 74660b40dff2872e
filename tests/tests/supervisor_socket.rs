//! The real `prims supervisor` process and its socket under hostile peers:
//! uids that are not the front-end's (nobody included) are refused for
//! real, stalled frames are closed at their deadline with the daemon's
//! memory flat, big partial frames are held to the shared budget, and one
//! uid cannot take every connection slot.

use prims_protocol::client::Client;
use prims_protocol::frame;
use prims_protocol::wire::{
    ErrorCode, Hello, Reply, Request, RequestBody, Response, ResponseBody, Welcome,
    MAX_FRAME_BYTES, PROTOCOL_VERSION,
};
use prims_supervisor::server::{ConnectionLimits, NOBODY_UID};
use prims_tests::daemon::Daemon;
use prims_tests::peer::{talk_as, wait_until_peer_read_all, Ended, Talk};
use prims_tests::{prims_bin, require_root, run_with_timeout};
use std::process::Command;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

/// The front-end's uid and group here: no account has them.
const FRONT: u32 = 4243;
/// A uid that is not the front-end's.
const STRANGER: u32 = 4242;
const MIB: u64 = 1024 * 1024;

fn daemon() -> Daemon {
    Daemon::start_with_args(
        "",
        &[
            "--allow-uid",
            &FRONT.to_string(),
            "--socket-group",
            &FRONT.to_string(),
        ],
    )
}

/// A hello, then a `stats` request with id 1.
fn hello_and_stats() -> Vec<u8> {
    let mut bytes = frame::encode(&Hello {
        protocol: PROTOCOL_VERSION,
        client: "peer".into(),
    })
    .unwrap();
    bytes.extend(
        frame::encode(&Request {
            id: 1,
            body: RequestBody::Stats,
        })
        .unwrap(),
    );
    bytes
}

/// Talk to the daemon as `uid`/`gid`: hello and one request.
async fn talk(d: &Daemon, uid: u32, gid: u32) -> Talk {
    let socket = d.socket.clone();
    tokio::task::spawn_blocking(move || {
        talk_as(
            uid,
            gid,
            &socket,
            &hello_and_stats(),
            2,
            Duration::from_secs(20),
        )
    })
    .await
    .unwrap()
}

fn assert_served(t: &Talk, who: &str) {
    assert_eq!(t.ended, Ended::Enough, "{who}: {t:?}");
    let _: Welcome = frame::decode(&t.frames[0]).unwrap();
    let resp: Response = frame::decode(&t.frames[1]).unwrap();
    assert_eq!(resp.id, 1, "{who}");
    assert!(
        matches!(resp.body, ResponseBody::Reply(Reply::Stats(_))),
        "{who}: {:?}",
        resp.body
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn only_root_and_the_front_ends_uid_are_served() {
    let d = daemon();
    // Each peer's gid owns the socket file, so only the daemon's check can refuse it.
    for (uid, who) in [(NOBODY_UID, "nobody"), (STRANGER, "uid 4242")] {
        let t = talk(&d, uid, FRONT).await;
        assert!(
            t.refused(),
            "{who} got an answer (a Welcome or a reply): {t:?}\n{}",
            d.log()
        );
    }
    assert_served(&talk(&d, FRONT, FRONT).await, "the front-end's uid");
    assert_served(&talk(&d, 0, 0).await, "root");
    let log = d.log();
    for uid in [NOBODY_UID, STRANGER] {
        assert!(
            log.contains(&format!("uid={uid}")) && log.contains("uid not allowed"),
            "no logged refusal of {uid}:\n{log}"
        );
    }
}

#[test]
fn the_supervisor_will_not_list_nobody() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    for nobody in ["nobody", "65534"] {
        let mut cmd = Command::new(prims_bin());
        cmd.arg("supervisor")
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .arg("--socket")
            .arg(dir.path().join("s.sock"))
            .args(["--allow-uid", nobody]);
        let out = run_with_timeout(cmd, Duration::from_secs(60));
        assert_eq!(out.code, Some(1), "{}", out.describe());
        assert!(
            out.stderr_str().contains("never allowed on the socket"),
            "{}",
            out.describe()
        );
        assert!(!dir.path().join("s.sock").exists());
    }
}

/// A secret whose value cannot be read: `prims policy check` accepts the
/// table with a warning naming the file, and the supervisor refuses to
/// start (as a reload refuses it) rather than run without what the admin
/// asked for.
#[test]
fn a_secret_that_cannot_be_read_is_named_by_the_check_and_refused_at_start() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    let missing = dir.path().join("example-token");
    std::fs::write(
        &policy,
        format!(
            "[network]\nmode = \"allowlist\"\nallow = [\"api.example.com\"]\n\
             [secrets.EXAMPLE_TOKEN]\nfile = \"{}\"\n\
             hosts = [\"api.example.com\"]\nheader = \"Authorization\"\ntenants = [\"acme\"]\n",
            missing.display()
        ),
    )
    .unwrap();
    let mut check = Command::new(prims_bin());
    check.args(["policy", "check"]).arg(&policy);
    let out = run_with_timeout(check, Duration::from_secs(30));
    assert_eq!(out.code, Some(0), "{}", out.describe());
    let warning = format!(
        "warning: secrets.EXAMPLE_TOKEN: {} cannot be read on this host",
        missing.display()
    );
    assert!(out.stderr_str().contains(&warning), "{}", out.describe());
    let mut cmd = Command::new(prims_bin());
    cmd.arg("supervisor")
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .arg("--socket")
        .arg(dir.path().join("s.sock"))
        .arg("--policy")
        .arg(&policy);
    let out = run_with_timeout(cmd, Duration::from_secs(60));
    assert_eq!(out.code, Some(1), "{}", out.describe());
    let refused = format!(
        "TLS inspection and secrets: secrets.EXAMPLE_TOKEN: {}: No such file",
        missing.display()
    );
    assert!(out.stderr_str().contains(&refused), "{}", out.describe());
    assert!(!dir.path().join("s.sock").exists());
}

/// From /proc/<pid>/status, in bytes.
fn status_bytes(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with(&format!("{key}:")))
        .unwrap_or_else(|| panic!("no {key} in /proc/{pid}/status"));
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("unreadable {line:?}"));
    kb * 1024
}

/// Reset the daemon's VmHWM to its current RSS, so that VmHWM afterwards is
/// the peak of what follows.
fn reset_peak(pid: u32) {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap();
}

/// A connection past the handshake, as root.
async fn greeted(d: &Daemon) -> UnixStream {
    let mut s = UnixStream::connect(&d.socket).await.unwrap();
    let hello = Hello {
        protocol: PROTOCOL_VERSION,
        client: "attacker".into(),
    };
    s.write_all(&frame::encode(&hello).unwrap()).await.unwrap();
    let welcome = frame::read_frame(&mut s).await.unwrap().unwrap();
    let _: Welcome = frame::decode(&welcome).unwrap();
    s
}

/// A header announcing `len` body bytes, and the first `sent` of them.
fn partial_frame(len: usize, sent: usize) -> Vec<u8> {
    let mut v = (len as u32).to_be_bytes().to_vec();
    v.resize(4 + sent, b' ');
    v
}

/// Read until the server closes `s`; how long that took from `since`.
async fn until_closed(mut s: UnixStream, since: Instant) -> Duration {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return since.elapsed(),
            Ok(_) => {}
        }
    }
}

async fn served(c: &Client) {
    let reply = tokio::time::timeout(Duration::from_secs(30), c.stats())
        .await
        .expect("a well-behaved client waited 30 s for stats");
    assert!(reply.is_ok(), "{reply:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hundred_stalled_frames_are_closed_at_the_deadline_and_cost_no_memory() {
    let deadline = ConnectionLimits::default().frame_deadline;
    let d = daemon();
    let pid = d.pid();
    let good = d.client().await;
    // Idle between frames from here to the end, longer than any deadline.
    let idle = d.client().await;
    good.stats().await.unwrap();
    let mut attackers = Vec::new();
    for _ in 0..100 {
        attackers.push(greeted(&d).await);
    }
    let rss_before = status_bytes(pid, "VmRSS");
    let data_before = status_bytes(pid, "VmData");
    reset_peak(pid);

    let mut closing = Vec::new();
    for mut s in attackers {
        // An 8 MiB frame announced, 16 bytes of it sent, then nothing. The
        // clock starts before the write: the daemon may read it at once.
        let sent = Instant::now();
        s.write_all(&partial_frame(MAX_FRAME_BYTES, 16))
            .await
            .unwrap();
        wait_until_peer_read_all(&s).await;
        closing.push(tokio::spawn(until_closed(s, sent)));
    }
    // Every header has been read: the daemon holds what the attack costs it.
    let data_during = status_bytes(pid, "VmData");
    served(&good).await;
    served(&d.client().await).await;

    let mut slowest = Duration::ZERO;
    for c in closing {
        let after = tokio::time::timeout(Duration::from_secs(120), c)
            .await
            .expect("a stalled connection was still open after 120 s")
            .unwrap();
        // The daemon's clock starts when it reads the first byte, after `sent`.
        assert!(
            after >= deadline,
            "closed after {after:?}, before the deadline"
        );
        slowest = slowest.max(after);
    }
    assert!(
        slowest < deadline + Duration::from_secs(50),
        "the last stalled connection lasted {slowest:?}"
    );
    let peak = status_bytes(pid, "VmHWM");
    let grew = peak.saturating_sub(rss_before);
    eprintln!(
        "100 stalled frames: closed within {slowest:?}; RSS {} KiB → peak {} KiB (+{} KiB); \
         VmData +{} KiB",
        rss_before / 1024,
        peak / 1024,
        grew / 1024,
        data_during.saturating_sub(data_before) / 1024
    );
    assert!(grew < 4 * MIB, "resident memory grew by {grew} bytes");
    // Allocating each announced body up front would have mapped 800 MiB.
    let mapped = data_during.saturating_sub(data_before);
    assert!(mapped < 64 * MIB, "the daemon mapped {mapped} more bytes");
    // Idle between frames is not a stalled frame.
    served(&idle).await;
    assert!(d.log().contains("did not complete within"), "{}", d.log());
}

#[tokio::test(flavor = "multi_thread")]
async fn big_partial_frames_are_held_to_the_shared_budget() {
    let limits = ConnectionLimits::default();
    let d = daemon();
    let pid = d.pid();
    let good = d.client().await;
    good.stats().await.unwrap();
    let mut attackers = Vec::new();
    for _ in 0..20 {
        attackers.push(greeted(&d).await);
    }
    let rss_before = status_bytes(pid, "VmRSS");
    reset_peak(pid);
    let started = Instant::now();
    let mut closing = Vec::new();
    for s in attackers {
        closing.push(tokio::spawn(async move {
            let (mut rd, mut wr) = s.into_split();
            // 6 MiB of an announced 8 MiB frame: past the budget the daemon
            // stops reading, and the write waits until it hangs up.
            let write = async {
                let _ = wr
                    .write_all(&partial_frame(MAX_FRAME_BYTES, 6 * MIB as usize))
                    .await;
            };
            let read = async {
                let mut buf = [0u8; 1024];
                while let Ok(n) = rd.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                }
            };
            tokio::join!(write, read);
            // Only now: dropping the write half would end the frame early.
            drop(wr);
        }));
    }
    // Small requests fit in their own allowance and never wait for the budget.
    tokio::time::sleep(Duration::from_secs(1)).await;
    served(&good).await;
    for c in closing {
        tokio::time::timeout(Duration::from_secs(120), c)
            .await
            .expect("an attacker's connection was still open after 120 s")
            .unwrap();
    }
    assert!(started.elapsed() >= limits.frame_deadline);
    let peak = status_bytes(pid, "VmHWM");
    let grew = peak.saturating_sub(rss_before);
    let bound = (limits.partial_frame_budget + 20 * limits.frame_allowance) as u64 + 16 * MIB;
    eprintln!(
        "20 × 6 MiB partial frames: peak RSS +{} KiB (budget {} KiB, bound {} KiB)",
        grew / 1024,
        limits.partial_frame_budget / 1024,
        bound / 1024
    );
    // Unbounded, the daemon would hold the 120 MiB the attackers sent.
    assert!(grew < bound, "resident memory grew by {grew} bytes");
    served(&good).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn one_uid_is_capped_while_another_is_served() {
    let cap = ConnectionLimits::default().max_connections_per_uid;
    let d = daemon();
    let mut mine = Vec::new();
    for _ in 0..cap {
        mine.push(d.client().await);
    }
    let over = Client::connect(&d.socket, "one too many").await;
    assert!(
        over.is_err(),
        "root got connection {} past its cap",
        cap + 1
    );
    assert!(
        d.log().contains("too many connections from this uid"),
        "{}",
        d.log()
    );
    // Another allowed uid is still let in and answered.
    assert_served(&talk(&d, FRONT, FRONT).await, "the front-end's uid");
    // And root's own connections still work.
    served(&mine[0]).await;
    served(&mine[cap - 1]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn only_root_drains_and_a_draining_supervisor_opens_no_session() {
    require_root();
    let d = daemon();
    let root = Client::connect(&d.socket, "operator").await.unwrap();
    let before = root.open_session(None).await.unwrap();

    // The front-end's uid may not take its node out of service.
    let mut bytes = frame::encode(&Hello {
        protocol: PROTOCOL_VERSION,
        client: "front-end".into(),
    })
    .unwrap();
    bytes.extend(
        frame::encode(&Request {
            id: 1,
            body: RequestBody::Drain,
        })
        .unwrap(),
    );
    let socket = d.socket.clone();
    let t = tokio::task::spawn_blocking(move || {
        talk_as(FRONT, FRONT, &socket, &bytes, 2, Duration::from_secs(20))
    })
    .await
    .unwrap();
    let resp: Response = frame::decode(&t.frames[1]).unwrap();
    match resp.body {
        ResponseBody::Error(e) => assert_eq!(e.code, ErrorCode::Forbidden, "{e:?}"),
        other => panic!("the front-end drained the supervisor: {other:?}"),
    }
    assert!(!root.stats().await.unwrap().draining);

    let stats = root.drain().await.unwrap();
    assert!(stats.draining && stats.sessions == 1, "{stats:?}");
    let e = root.open_session(None).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::Draining), "{e}");
    // Its sessions go on.
    root.session_info(&before.session_id, None).await.unwrap();
}
