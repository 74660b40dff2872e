//! The egress proxy process as the supervisor runs it: a real
//! `prims egress-proxy`, real listeners and a real upstream server on
//! loopback, its confinement read from /proc, and a restart after a kill.

use prims_egress::decide::Rules;
use prims_egress::run::Budget;
use prims_policy::network::{parse_allow_entry, AllowList};
use prims_supervisor::egress::EgressProxy;
use prims_tests::{prims_bin, require_root};
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const BUDGET: Budget = Budget {
    max_bytes: 1 << 20,
    max_connections: 16,
};

async fn upstream() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut c, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 2048];
                let mut seen = Vec::new();
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match c.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = c
                    .write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
                    )
                    .await;
            });
        }
    });
    addr
}

/// A listener like a jail's: its address, and the fd to hand over.
fn listener() -> (SocketAddr, OwnedFd) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    (l.local_addr().unwrap(), OwnedFd::from(l))
}

async fn ask(proxy: SocketAddr, request: &str) -> String {
    let mut c = TcpStream::connect(proxy).await.unwrap();
    c.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out).await;
    String::from_utf8_lossy(&out).into_owned()
}

fn rules(entries: &[String]) -> Rules {
    let e: Vec<_> = entries
        .iter()
        .map(|s| parse_allow_entry(s).unwrap())
        .collect();
    Rules {
        list: AllowList::new(&e, &[80, 443]),
        ..Rules::default()
    }
}

/// The proxy processes that are children of this test process.
fn proxy_pids() -> Vec<i32> {
    let me = std::process::id().to_string();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let (Ok(cmd), Ok(stat)) = (
            std::fs::read(e.path().join("cmdline")),
            std::fs::read_to_string(e.path().join("stat")),
        ) else {
            continue;
        };
        let ppid = stat
            .rsplit(')')
            .next()
            .and_then(|s| s.split_whitespace().nth(1));
        if ppid == Some(me.as_str()) && cmd.windows(12).any(|w| w == b"egress-proxy") {
            out.push(pid);
        }
    }
    out
}

fn status(pid: i32, key: &str) -> String {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}:")))
        .unwrap_or_default()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_are_served_recorded_and_closed_between() {
    require_root();
    let up = upstream().await;
    let proxy = EgressProxy::new(prims_bin(), vec![]);
    let (addr, fd) = listener();
    let jail = proxy.attach(fd).await.unwrap();
    let before = ask(addr, &format!("GET http://{up}/ HTTP/1.1\r\n\r\n")).await;
    assert!(
        before.starts_with("HTTP/1.1 403") && before.contains("no call is running"),
        "{before}"
    );

    let run = jail
        .begin(&rules(&[format!("127.0.0.1:{}", up.port())]), BUDGET)
        .await
        .unwrap();
    let ok = ask(addr, &format!("GET http://{up}/ HTTP/1.1\r\n\r\n")).await;
    assert!(ok.ends_with("hello"), "{ok}");
    let no = ask(addr, "CONNECT evil.test:443 HTTP/1.1\r\n\r\n").await;
    assert!(no.starts_with("HTTP/1.1 403"), "{no}");
    let report = jail.end(run).await;
    assert_eq!(report.allowed.len(), 1, "{report:?}");
    assert_eq!(report.allowed[0].port, up.port());
    assert!(report.allowed[0].bytes > 5);
    assert_eq!(report.denied.len(), 1);
    assert_eq!(report.denied[0].host, "evil.test");
    assert_eq!(
        report.denied[0].reason,
        "evil.test is not in the allow-list"
    );

    let after = ask(addr, &format!("GET http://{up}/ HTTP/1.1\r\n\r\n")).await;
    assert!(after.starts_with("HTTP/1.1 403"), "{after}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_process_is_nobody_undumpable_and_comes_back_after_a_kill() {
    require_root();
    // The proxy inherits a soft limit of 256 open files, below the hard one.
    let mut nofile = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain getrlimit/setrlimit on this process, with a valid struct.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut nofile), 0);
        nofile.rlim_cur = 256;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &nofile), 0);
    }
    let up = upstream().await;
    let proxy = EgressProxy::new(prims_bin(), vec![]);
    let (addr, fd) = listener();
    let jail = proxy.attach(fd).await.unwrap();
    // An answered run means the process reached its control loop, confined.
    let first = jail.begin(&rules(&[]), BUDGET).await.unwrap();
    jail.end(first).await;
    let pid = proxy.pid().await.expect("started") as i32;
    assert!(proxy_pids().contains(&pid));
    assert_eq!(status(pid, "Uid"), "65534 65534 65534 65534");
    assert_eq!(status(pid, "Gid"), "65534 65534 65534 65534");
    assert_eq!(status(pid, "Groups"), "");
    assert_eq!(status(pid, "NoNewPrivs"), "1");
    assert_eq!(status(pid, "CapEff"), "0000000000000000");
    // Not dumpable: its /proc files belong to root, out of reach of other
    // processes running as nobody.
    let environ = std::fs::metadata(format!("/proc/{pid}/environ")).unwrap();
    assert_eq!(environ.uid(), 0);
    // Room for two sockets and two pipes per relayed connection: the soft
    // limit on open files is raised to the hard one.
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let files: Vec<&str> = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("a Max open files line")
        .split_whitespace()
        .collect();
    assert_eq!(files[3], nofile.rlim_max.to_string(), "{limits}");

    // SAFETY: signalling a child process this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    for _ in 0..200 {
        if !proxy_pids().contains(&pid) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    // The next run starts a new process and attaches the jail to it again.
    let run = jail
        .begin(&rules(&[format!("127.0.0.1:{}", up.port())]), BUDGET)
        .await
        .unwrap();
    let ok = ask(addr, &format!("GET http://{up}/ HTTP/1.1\r\n\r\n")).await;
    assert!(ok.ends_with("hello"), "{ok}");
    assert_eq!(jail.end(run).await.allowed.len(), 1);
    let again = proxy.pid().await.expect("started again") as i32;
    assert_ne!(again, pid);
    assert!(proxy_pids().contains(&again));
}
