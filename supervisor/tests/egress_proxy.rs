//! The egress proxy process as the supervisor runs it: a real
//! `prims egress-proxy`, real listeners and a real upstream server on
//! loopback, its identity and confinement read from /proc and attacked by
//! other uids, a run's connections closed at its end, and a restart after
//! a kill or a hang.

use prims_egress::decide::Rules;
use prims_egress::run::Budget;
use prims_policy::network::{parse_allow_entry, AllowList};
use prims_supervisor::egress::EgressProxy;
use prims_tests::http::{self, HttpServer};
use prims_tests::{prims_bin, require_root};
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const BUDGET: Budget = Budget {
    max_bytes: 1 << 20,
    max_connections: 16,
};

/// An upstream on loopback that answers every request "hello".
fn upstream() -> HttpServer {
    HttpServer::loopback(|_, mut c| async move {
        let _ = http::reply(&mut c, "200 OK", b"hello").await;
    })
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

/// The egress processes this test process started (launchers), and theirs
/// (the proxies).
fn proxy_pids() -> Vec<i32> {
    let me = std::process::id() as i32;
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
        let ppid: Option<i32> = stat
            .rsplit(')')
            .next()
            .and_then(|s| s.split_whitespace().nth(1))
            .and_then(|p| p.parse().ok());
        if cmd.windows(12).any(|w| w == b"egress-proxy")
            && (ppid == Some(me) || ppid.is_some_and(|p| parent_of(p) == Some(me)))
        {
            out.push(pid);
        }
    }
    out
}

fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')')
        .next()?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
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
    let server = upstream();
    let up = server.addr;
    let proxy = EgressProxy::new(prims_bin(), vec![], prims_tests::egress_account());
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
    // What the jail tried while no run was in force is in the next run's
    // record, with why it was refused.
    let denied: Vec<(&str, &str)> = report
        .denied
        .iter()
        .map(|d| (d.host.as_str(), d.reason.as_str()))
        .collect();
    assert_eq!(
        denied,
        [
            (
                "127.0.0.1",
                "no call is running in this session; connections are allowed only while one runs"
            ),
            ("evil.test", "evil.test is not in the allow-list"),
        ]
    );

    let after = ask(addr, &format!("GET http://{up}/ HTTP/1.1\r\n\r\n")).await;
    assert!(after.starts_with("HTTP/1.1 403"), "{after}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_process_is_its_accounts_undumpable_and_comes_back_after_a_kill() {
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
    let server = upstream();
    let up = server.addr;
    let account = prims_tests::egress_account();
    let proxy = EgressProxy::new(prims_bin(), vec![], account);
    let (addr, fd) = listener();
    let jail = proxy.attach(fd).await.unwrap();
    // An answered run means the process reached its control loop, confined.
    let first = jail.begin(&rules(&[]), BUDGET).await.unwrap();
    jail.end(first).await;
    let pid = proxy.pid().await.expect("started") as i32;
    assert!(proxy_pids().contains(&pid));
    // Effective: its account; real and saved: root, which it cannot name
    // in its own user namespace.
    let (u, g) = (account.uid, account.gid);
    assert_eq!(status(pid, "Uid"), format!("0 {u} 0 {u}"));
    assert_eq!(status(pid, "Gid"), format!("{g} {g} {g} {g}"));
    assert_eq!(status(pid, "Groups"), "");
    assert_eq!(status(pid, "NoNewPrivs"), "1");
    for caps in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(status(pid, caps), "0000000000000000", "{caps}");
    }
    // A user namespace of its own, where only its account is mapped (the
    // host's maps everything: 0 0 4294967295).
    let map = std::fs::read_to_string(format!("/proc/{pid}/uid_map")).unwrap();
    assert_eq!(
        map.split_whitespace().collect::<Vec<_>>(),
        [u.to_string(), u.to_string(), "1".into()],
    );
    // Not dumpable: its /proc files belong to root.
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

    // SAFETY: signalling a process this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    wait_gone(pid).await;
    // The next run is served by a new process, with the jail attached.
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

async fn wait_gone(pid: i32) {
    for _ in 0..500 {
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("{pid} never went");
}

/// What `uid` gets trying to stop, limit and trace `pid`: the errno of
/// kill(SIGSTOP), prlimit(RLIMIT_NOFILE) and ptrace(PTRACE_SEIZE), from a
/// process of its own running as `uid` through and through.
fn attacks_as(uid: u32, pid: i32) -> [i32; 3] {
    let mut fds = [0; 2];
    // SAFETY: pipe with a valid array; fork in a test whose child only makes
    // syscalls and exits.
    unsafe {
        assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
        let child = libc::fork();
        assert!(child >= 0);
        if child == 0 {
            let errno = || *libc::__errno_location();
            let mut out = [0i32; 3];
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setresgid(uid, uid, uid) != 0
                || libc::setresuid(uid, uid, uid) != 0
            {
                libc::_exit(2);
            }
            out[0] = if libc::kill(pid, libc::SIGSTOP) == 0 {
                0
            } else {
                errno()
            };
            let lim = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            out[1] = if libc::prlimit(pid, libc::RLIMIT_NOFILE, &lim, std::ptr::null_mut()) == 0 {
                0
            } else {
                errno()
            };
            out[2] = if libc::ptrace(libc::PTRACE_SEIZE, pid, 0, 0) == 0 {
                0
            } else {
                errno()
            };
            libc::write(fds[1], out.as_ptr().cast(), std::mem::size_of_val(&out));
            libc::_exit(0);
        }
        libc::close(fds[1]);
        let mut out = [0i32; 3];
        let n = libc::read(fds[0], out.as_mut_ptr().cast(), std::mem::size_of_val(&out));
        libc::close(fds[0]);
        let mut st = 0;
        libc::waitpid(child, &mut st, 0);
        assert_eq!(
            n as usize,
            std::mem::size_of_val(&out),
            "the attacker as {uid} did not report"
        );
        out
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_uid_but_roots_can_stop_limit_or_trace_the_proxy() {
    require_root();
    let account = prims_tests::egress_account();
    let proxy = EgressProxy::new(prims_bin(), vec![], account);
    let (_addr, fd) = listener();
    let jail = proxy.attach(fd).await.unwrap();
    let run = jail.begin(&rules(&[]), BUDGET).await.unwrap();
    let pid = proxy.pid().await.expect("started") as i32;
    // nobody (whom the proxy once was), its own account, and another uid.
    for uid in [65534, account.uid, 4242] {
        assert_eq!(
            attacks_as(uid, pid),
            [libc::EPERM, libc::EPERM, libc::EPERM],
            "as uid {uid}: kill(SIGSTOP), prlimit, ptrace"
        );
    }
    let state = status(pid, "State");
    assert!(
        !state.starts_with('T') && !state.starts_with('Z'),
        "it runs on: {state}"
    );
    assert!(jail.end(run).await.allowed.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_proxy_is_replaced_within_seconds_and_the_run_goes_on() {
    require_root();
    let server = upstream();
    let up = server.addr;
    let proxy = EgressProxy::new(prims_bin(), vec![], prims_tests::egress_account());
    let (addr, fd) = listener();
    let jail = proxy.attach(fd).await.unwrap();
    let run = jail
        .begin(&rules(&[format!("127.0.0.1:{}", up.port())]), BUDGET)
        .await
        .unwrap();
    let pid = proxy.pid().await.expect("started") as i32;
    // Root stops it, as a wedged process would be.
    // SAFETY: signalling a process this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    let stopped = std::time::Instant::now();
    wait_gone(pid).await;
    let replaced = loop {
        if let Some(p) = proxy.pid().await.filter(|p| *p as i32 != pid) {
            break p as i32;
        }
        assert!(stopped.elapsed().as_secs() < 10, "never replaced");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    let took = stopped.elapsed();
    assert!(
        took < std::time::Duration::from_secs(4),
        "replaced after {took:?}"
    );
    // The run under way is served by the new process, under its rules.
    let ok = ask(addr, &format!("GET http://{up}/ HTTP/1.1\r\n\r\n")).await;
    assert!(ok.ends_with("hello"), "{ok}");
    let no = ask(
        addr,
        "CONNECT evil.test:443 HTTP/1.1\r\nHost: evil.test:443\r\n\r\n",
    )
    .await;
    assert!(no.starts_with("HTTP/1.1 403"), "{no}");
    let report = jail.end(run).await;
    assert_eq!(report.allowed.len(), 1, "{report:?}");
    assert!(proxy_pids().contains(&replaced));
}
