//! `network.mode = "allowlist"` on a real supervisor: jailed code reaches
//! an allowed host through the egress proxy with plain urllib (the proxy
//! variables are set), everything else is refused fast, and the result
//! says what was reached and what was refused. Test names resolve through
//! the supervisor's `--egress-resolve`, which no policy key reaches. The
//! servers live in network namespaces of the tests' own, at private
//! addresses: no run reaches the host's loopback, whatever the list says.

use prims_protocol::jail::Status;
use prims_protocol::wire::RunRequest;
use prims_tests::daemon::{run_req, Daemon};
use prims_tests::forked::forked_session;
use prims_tests::http::{HttpServer, Request};
use prims_tests::live::wait_for_stats;
use prims_tests::live::{send, stderr, stdout};
use prims_tests::netns::NetnsHost;
use prims_tests::web;
use std::net::SocketAddr;
use tokio::io::AsyncWriteExt;

/// The size of `/big`.
const BIG: usize = 8 << 20;

/// A server of the test's ([`HttpServer`]), in a network namespace of its
/// own at a private address (gone with the value).
struct Server {
    addr: SocketAddr,
    http: HttpServer,
    _ns: NetnsHost,
}

impl Server {
    /// A listener in a new namespace, served by `handle` for each
    /// connection's request head (the bytes up to its blank line).
    fn start<F, Fut>(handle: F) -> Server
    where
        F: Fn(Request, tokio::net::TcpStream) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let ns = NetnsHost::new();
        let http = HttpServer::on(ns.listen(0), handle);
        Server {
            addr: http.addr,
            http,
            _ns: ns,
        }
    }

    fn port(&self) -> u16 {
        self.addr.port()
    }

    /// What each request sent up to its head's end, in order.
    fn heads(&self) -> Vec<String> {
        self.http.heads()
    }

    fn connections(&self) -> usize {
        self.http.connections()
    }
}

/// An HTTP server: `/ok` answers "hello", `/big` sends 8 MiB, `/redirect`
/// sends the client to a host outside the list.
async fn upstream() -> Server {
    Server::start(|req, mut c| async move {
        let head = req.head;
        if head.starts_with("GET /big") {
            let body = vec![b'x'; BIG];
            let head =
                format!("HTTP/1.1 200 OK\r\nContent-Length: {BIG}\r\nConnection: close\r\n\r\n");
            let _ = c.write_all(head.as_bytes()).await;
            let _ = c.write_all(&body).await;
            return;
        }
        let reply = if head.starts_with("GET /redirect") {
            "HTTP/1.1 302 Found\r\nLocation: http://evil.test.example/\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_string()
        } else {
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello".to_string()
        };
        let _ = c.write_all(reply.as_bytes()).await;
    })
}

fn daemon(up: SocketAddr) -> Daemon {
    daemon_with(up, "")
}

/// A daemon whose test names resolve to `up`'s address, which an entry
/// names on `up`'s port (a private address is refused by name otherwise);
/// `network` keys beyond mode and allow in `extra`.
fn daemon_with(up: SocketAddr, extra: &str) -> Daemon {
    let (ip, port) = (up.ip(), up.port());
    let policy = format!(
        "[network]\nmode = \"allowlist\"\n\
         allow = [\"files.test.example:{port}\", \"{ip}:{port}\", \"*.other.example\", \
         \"*.other.example:{port}\"]\n\
         {extra}\n[interpreters]\npool_size = 0\n"
    );
    let mut args = vec![
        "--egress-resolve".to_string(),
        format!("files.test.example={ip}"),
        "--egress-resolve".into(),
        "meta.other.example=169.254.169.254".into(),
        "--egress-resolve".into(),
        "loop.other.example=127.0.0.1".into(),
        "--egress-resolve".into(),
        format!("evil.test.example={ip}"),
        "--egress-resolve".into(),
        format!("other.example={ip}"),
    ];
    for i in 0..8 {
        args.push("--egress-resolve".into());
        args.push(format!("h{i}.other.example={ip}"));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Daemon::start_with_args(&policy, &args)
}

const FETCH: &str = r#"
import time, urllib.request, urllib.error
def fetch(url):
    t = time.monotonic()
    try:
        body = urllib.request.urlopen(url, timeout=20).read().decode()
        print("OK", url, body, round(time.monotonic() - t, 3))
    except urllib.error.HTTPError as e:
        print("HTTP", url, e.code, round(time.monotonic() - t, 3))
    except Exception as e:
        print("ERR", url, type(e).__name__, round(time.monotonic() - t, 3))
"#;

fn lines(r: &prims_protocol::wire::RunReply) -> Vec<Vec<String>> {
    stdout(r)
        .lines()
        .map(|l| l.split(' ').map(str::to_string).collect())
        .collect()
}

/// Allowlist mode forks too: an interpreter forked from a template gets its
/// jail's listener handed to the egress proxy as a cold one does, reaches
/// the list and nothing else, and so does a fresh python forked in place
/// of it; a warm spare is kept as in the other modes, forked.
#[tokio::test(flavor = "multi_thread")]
async fn egress_allowlist_forked_interpreters_and_their_fresh_pythons_reach_only_the_list() {
    let up = upstream().await;
    let d = daemon(up.addr);
    let c = d.client().await;
    let port = up.port();
    let code = format!(
        "{FETCH}\nimport os\nprint('forked', os.path.isdir('/.t'))\n\
         fetch('http://files.test.example:{port}/ok')\n\
         fetch('http://evil.test.example:{port}/ok')\n"
    );
    let s = forked_session(&d, &c).await;
    for fresh in [false, true] {
        let before = c.stats().await.unwrap();
        let r = send(
            &c,
            RunRequest {
                fresh,
                ..run_req(&s, &code)
            },
        )
        .await;
        assert_eq!(r.outcome.status, Status::Ok, "{}", stderr(&r));
        let got = lines(&r);
        assert_eq!(got[0], ["forked", "True"], "fresh {fresh}: {got:?}");
        assert_eq!(
            got[1][..3],
            [
                "OK",
                &format!("http://files.test.example:{port}/ok"),
                "hello"
            ],
            "fresh {fresh}: {got:?}"
        );
        assert_eq!(
            (got[2][0].as_str(), got[2][2].as_str()),
            ("HTTP", "403"),
            "fresh {fresh}: {got:?}"
        );
        let net = r.network.expect("a network report");
        assert_eq!((net.allowed.len(), net.denied.len()), (1, 1), "{net:?}");
        let after = c.stats().await.unwrap();
        assert_eq!(
            after.starts_cold, before.starts_cold,
            "no cold start: {after:?}"
        );
        if fresh {
            assert_eq!(
                after.starts_in_place,
                before.starts_in_place + 1,
                "{after:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn egress_allowlist_keeps_a_forked_warm_spare_for_a_new_session() {
    let up = upstream().await;
    let (ip, port) = (up.addr.ip(), up.port());
    let policy = format!(
        "[network]\nmode = \"allowlist\"\nallow = [\"{ip}:{port}\"]\n[interpreters]\npool_size = 1\n"
    );
    let d = Daemon::start(&policy);
    let c = d.client().await;
    wait_for_stats(&c, "a warm spare", |s| s.pool_ready == 1).await;
    let s = c.open_session(None).await.unwrap().session_id;
    let code = format!(
        "{FETCH}\nimport os\nprint('forked', os.path.isdir('/.t'))\nfetch('http://{ip}:{port}/ok')\n"
    );
    let r = send(&c, run_req(&s, &code)).await;
    assert!(r.interpreter.warm, "the first call found the spare: {r:?}");
    let got = lines(&r);
    assert_eq!(got[0], ["forked", "True"], "{got:?}");
    assert_eq!(
        got[1][..3],
        ["OK", &format!("http://{ip}:{port}/ok"), "hello"],
        "{got:?}"
    );
    let stats = c.stats().await.unwrap();
    assert_eq!(stats.starts_cold, 0, "{stats:?}");
}

/// A reload from no network to allowlist mode: the spare the pool started
/// under the old policy (no network) is never handed out; the next new
/// session reaches the list, and the pool refills under the new policy.
#[tokio::test(flavor = "multi_thread")]
async fn egress_allowlist_after_a_reload_no_session_gets_a_spare_of_the_old_policy() {
    let up = upstream().await;
    let (ip, port) = (up.addr.ip(), up.port());
    let d = Daemon::start("[interpreters]\npool_size = 1\n");
    let c = d.client().await;
    wait_for_stats(&c, "a warm spare", |s| s.pool_ready == 1).await;
    d.reload_and_wait(
        &format!(
            "[network]\nmode = \"allowlist\"\nallow = [\"{ip}:{port}\"]\n[interpreters]\npool_size = 1\n"
        ),
        prims_tests::live::HANG_GUARD,
    );
    let code = format!("{FETCH}\nfetch('http://{ip}:{port}/ok')\n");
    for round in ["right after the reload", "from the refilled pool"] {
        let s = c.open_session(None).await.unwrap().session_id;
        let r = send(&c, run_req(&s, &code)).await;
        let got = lines(&r);
        assert_eq!(
            got[0][..3],
            ["OK", &format!("http://{ip}:{port}/ok"), "hello"],
            "{round}: {got:?}\n{}",
            d.log()
        );
        wait_for_stats(&c, "the pool refilled", |s| s.pool_ready == 1).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_allowed_host_is_reached_and_the_rest_refused_fast() {
    let up = upstream().await;
    let d = daemon(up.addr);
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap().session_id;
    let port = up.port();
    let code = format!(
        "{FETCH}\nfetch('http://files.test.example:{port}/ok')\n\
         fetch('http://evil.test.example:{port}/ok')\n\
         fetch('http://meta.other.example/latest/meta-data/')\n\
         fetch('http://files.test.example:{port}/redirect')\n"
    );
    let r = send(&c, run_req(&s, &code)).await;
    assert_eq!(r.outcome.status, Status::Ok, "{}", stderr(&r));
    let got = lines(&r);
    assert_eq!(
        got[0][..3],
        [
            "OK",
            &format!("http://files.test.example:{port}/ok"),
            "hello"
        ]
    );
    for (i, what) in [
        (1, "not in the list"),
        (2, "metadata address"),
        (3, "redirect to a host not in the list"),
    ] {
        assert_eq!(got[i][0], "HTTP", "{what}: {got:?}");
        assert_eq!(got[i][2], "403", "{what}: {got:?}");
        let secs: f64 = got[i][3].parse().unwrap();
        assert!(secs < 5.0, "{what} took {secs} s");
    }
    let net = r.network.expect("a network report");
    assert_eq!(net.allowed.len(), 1, "{net:?}");
    assert_eq!(
        (net.allowed[0].host.as_str(), net.allowed[0].port),
        ("files.test.example", port)
    );
    assert!(net.allowed[0].bytes > 5);
    assert_eq!(net.allowed[0].connections, 2, "/ok and /redirect");
    let denied: Vec<(&str, u16, &str)> = net
        .denied
        .iter()
        .map(|d| (d.host.as_str(), d.port, d.reason.as_str()))
        .collect();
    assert_eq!(denied.len(), 3, "{denied:?}");
    let evil = "evil.test.example is not in the allow-list";
    assert_eq!(denied[0], ("evil.test.example", port, evil));
    // The redirect's target, on its own port.
    assert_eq!(denied[2], ("evil.test.example", 80, evil));
    assert_eq!(denied[1].0, "meta.other.example");
    let stats = c.stats().await.unwrap();
    assert_eq!((stats.egress_allowed, stats.egress_denied), (2, 3));
    // Every decision is in the audit log, with its session.
    let log = std::fs::read_to_string(d.state.join("audit.log")).unwrap();
    let egress: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["event"] == "egress")
        .collect();
    assert_eq!(egress.len(), 4, "{egress:?}");
    assert_eq!(egress[0]["decision"], "allowed");
    assert_eq!(egress[0]["count"], 2);
    assert!(egress
        .iter()
        .all(|e| e["session"] == egress[0]["session"] && e["session"].is_string()));
    assert_eq!(egress[1]["decision"], "denied");
    assert_eq!(egress[1]["host"], "evil.test.example");
    assert!(
        denied[1].2.contains("169.254.169.254 (link-local"),
        "{denied:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bare_suffix_a_loopback_name_and_a_foreign_port_are_refused() {
    let up = upstream().await;
    let d = daemon(up.addr);
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap().session_id;
    let port = up.port();
    // `*.other.example` does not cover other.example; loop.other.example
    // is listed (ports 80, 443) but resolves to loopback, which no entry
    // can name; files.test.example is listed on its own port only.
    let code = format!(
        "{FETCH}\nfetch('http://other.example:{port}/ok')\n\
         fetch('http://loop.other.example/ok')\n\
         fetch('https://files.test.example:8443/ok')\n"
    );
    let r = send(&c, run_req(&s, &code)).await;
    assert_eq!(r.outcome.status, Status::Ok, "{}", stderr(&r));
    let got = lines(&r);
    assert_eq!(
        got[0][..3],
        ["HTTP", &format!("http://other.example:{port}/ok"), "403"]
    );
    assert_eq!(got[1][..3], ["HTTP", "http://loop.other.example/ok", "403"]);
    // urllib turns a refused CONNECT into an error of its own.
    assert_eq!(
        got[2][..2],
        ["ERR", "https://files.test.example:8443/ok"],
        "{got:?}"
    );
    for l in &got {
        let secs: f64 = l.last().unwrap().parse().unwrap();
        assert!(secs < 5.0, "{l:?}");
    }
    let net = r.network.expect("a network report");
    assert!(net.allowed.is_empty(), "{net:?}");
    let denied: Vec<(&str, u16, &str)> = net
        .denied
        .iter()
        .map(|d| (d.host.as_str(), d.port, d.reason.as_str()))
        .collect();
    assert_eq!(denied.len(), 3, "{denied:?}");
    assert_eq!(
        denied[0],
        (
            "other.example",
            port,
            "other.example is not in the allow-list"
        )
    );
    assert_eq!(denied[1].0, "loop.other.example");
    assert!(
        denied[1].2.contains("127.0.0.1 (loopback address)"),
        "{denied:?}"
    );
    assert_eq!(
        denied[2],
        (
            "files.test.example",
            8443,
            format!("port 8443 is not allowed for files.test.example (allowed: {port})").as_str()
        )
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn requests_and_pip_download_reach_an_allowed_index() {
    let wheel = tiny_wheel();
    let idx = index(wheel.clone()).await;
    let port = idx.port();
    let d = daemon(idx.addr);
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap().session_id;
    // Neither is told of the proxy: both read the jail's HTTP(S)_PROXY.
    let code = format!(
        "import subprocess, sys, requests\n\
         r = requests.get('http://files.test.example:{port}/simple/tinypkg/', timeout=20)\n\
         print('requests', r.status_code, 'tinypkg-1.0-py3-none-any.whl' in r.text)\n\
         p = subprocess.run([sys.executable, '-m', 'pip', 'download', '--no-deps', '-d', '/workspace/dl',\n\
         \x20   '--index-url', 'http://files.test.example:{port}/simple/', '--trusted-host',\n\
         \x20   'files.test.example', 'tinypkg'], capture_output=True, text=True)\n\
         print('pip', p.returncode)\n\
         print(p.stderr[-2000:], file=sys.stderr)\n"
    );
    let req = RunRequest {
        requirements: vec!["requests".into(), "pip".into()],
        ..run_req(&s, &code)
    };
    let r = send(&c, req).await;
    assert_eq!(stdout(&r), "requests 200 True\npip 0\n", "{}", stderr(&r));
    let got = std::fs::read(d.workspace(&s).join("dl/tinypkg-1.0-py3-none-any.whl")).unwrap();
    assert!(
        got == wheel,
        "the downloaded wheel differs from the index's"
    );
    let net = r.network.expect("a network report");
    assert_eq!(net.allowed.len(), 1, "{net:?}");
    assert_eq!(net.allowed[0].host, "files.test.example");
    // requests' page, pip's page and pip's wheel.
    assert!(net.allowed[0].connections >= 3, "{net:?}");
    assert!(net.denied.is_empty(), "{net:?}");
}

/// Servers in a network namespace of the test's own, at a private address:
/// reached when an entry names that address, over HTTP and over a CONNECT
/// tunnel to HTTPS (passed through: the jail verifies the server's own
/// certificate), refused by a name that merely resolves there, and
/// never reached by a raw socket from the jail.
#[tokio::test(flavor = "multi_thread")]
async fn servers_behind_a_real_route_are_reached_only_as_named() {
    let dir = tempfile::tempdir().unwrap();
    let mut host = NetnsHost::new();
    let ns = host.addr;
    let (cert, key) = web::certificate(dir.path(), "intra.test.example");
    let http = web::in_netns(&mut host, 8080, "from-the-namespace", None);
    let https = web::in_netns(&mut host, 8443, "tls-in-the-namespace", Some((&cert, &key)));
    web::in_netns(&mut host, 80, "never", None);
    let policy = format!(
        "[network]\nmode = \"allowlist\"\n\
         allow = [\"{ns}:{http}\", {{ host = \"intra.test.example:{https}\", tls = \"passthrough\" }}, \"{ns}:{https}\", \"private.test.example\"]\n\
         [interpreters]\npool_size = 0\n"
    );
    let d = Daemon::start_with_args(
        &policy,
        &[
            "--egress-resolve",
            &format!("intra.test.example={ns}"),
            "--egress-resolve",
            &format!("private.test.example={ns}"),
        ],
    );
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap().session_id;
    std::fs::copy(&cert, d.workspace(&s).join("ca.pem")).unwrap();
    let code = format!(
        "{FETCH}\nfetch('http://{ns}:{http}/')\n\
         import errno, socket, ssl\n\
         ctx = ssl.create_default_context(cafile='/workspace/ca.pem')\n\
         print('TLS', urllib.request.urlopen('https://intra.test.example:{https}/', context=ctx, timeout=20).read().decode())\n\
         fetch('http://private.test.example/')\n\
         t = time.monotonic()\n\
         raw = socket.socket()\n\
         raw.settimeout(20)\n\
         try:\n\
         \x20   raw.connect(('{ns}', {http}))\n\
         \x20   print('RAW connected')\n\
         except OSError as e:\n\
         \x20   print('RAW', errno.errorcode.get(e.errno, e.errno), round(time.monotonic() - t, 3))\n"
    );
    let r = send(&c, run_req(&s, &code)).await;
    assert_eq!(r.outcome.status, Status::Ok, "{}", stderr(&r));
    let got = lines(&r);
    assert_eq!(
        got[0][..3],
        ["OK", &format!("http://{ns}:{http}/"), "from-the-namespace"],
        "{got:?}"
    );
    assert_eq!(got[1], ["TLS", "tls-in-the-namespace"], "{got:?}");
    assert_eq!(
        got[2][..3],
        ["HTTP", "http://private.test.example/", "403"],
        "{got:?}"
    );
    assert_eq!(got[3][0], "RAW", "{got:?}");
    assert!(
        matches!(got[3][1].as_str(), "ENETUNREACH" | "EACCES"),
        "{got:?}"
    );
    assert!(got[3][2].parse::<f64>().unwrap() < 1.0, "{got:?}");
    let net = r.network.expect("a network report");
    let allowed: Vec<(String, u16)> = net
        .allowed
        .iter()
        .map(|a| (a.host.clone(), a.port))
        .collect();
    assert_eq!(
        allowed,
        [
            (ns.to_string(), http),
            ("intra.test.example".to_string(), https)
        ]
    );
    assert_eq!(net.denied.len(), 1, "{net:?}");
    assert_eq!(net.denied[0].host, "private.test.example");
    assert!(
        net.denied[0].reason.contains(&format!("{ns} (private")),
        "{net:?}"
    );
}

/// Sends each request of `RAW` to the proxy on a raw socket (urllib would
/// write a correct Host itself) and prints the status and body it got.
const RAW: &str = r#"
import socket
def raw(label, request):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    s.sendall(request.encode())
    got = b""
    while chunk := s.recv(65536):
        got += chunk
    s.close()
    head, _, body = got.partition(b"\r\n\r\n")
    print(label, head.split(b" ")[1].decode(), body.decode(), sep="|")
"#;

/// A plain-HTTP request judged for one host must not reach another virtual
/// host on the same server: a Host header that names another target, a
/// second Host header, or one hidden behind a bare LF is refused with 400,
/// recorded against the target, and never reaches the upstream; a Host
/// that matches still goes through.
#[tokio::test(flavor = "multi_thread")]
async fn a_host_header_naming_another_target_never_reaches_the_upstream() {
    let up = upstream().await;
    let port = up.port();
    let d = daemon(up.addr);
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap().session_id;
    let target = format!("files.test.example:{port}");
    let code = format!(
        "{RAW}\n\
         raw('mismatch', 'GET http://{target}/mismatch HTTP/1.1\\r\\nHost: internal.other.example\\r\\n\\r\\n')\n\
         raw('twice', 'GET http://{target}/twice HTTP/1.1\\r\\nHost: {target}\\r\\nHost: internal.other.example\\r\\n\\r\\n')\n\
         raw('bare-lf', 'GET http://{target}/bare-lf HTTP/1.1\\r\\nHost: {target}\\r\\nX-A: 1\\nHost: internal.other.example\\r\\n\\r\\n')\n\
         raw('connect', 'CONNECT {target} HTTP/1.1\\r\\nHost: internal.other.example:{port}\\r\\n\\r\\n')\n\
         raw('match', 'GET http://FILES.test.example:{port}/ok HTTP/1.1\\r\\nHost: files.TEST.example:{port}\\r\\n\\r\\n')\n"
    );
    let r = send(&c, run_req(&s, &code)).await;
    assert_eq!(r.outcome.status, Status::Ok, "{}", stderr(&r));
    let rule = "(a proxied request's Host must name its target)";
    let mismatch =
        format!("the Host header names \"internal.other.example\", not the target {target} {rule}");
    let twice =
        "the request has 2 Host headers (a proxied request's Host must name its target, once)";
    let bare_lf = "a line of the request head ends in a bare CR or LF, which a server may read as a line end the proxy did not see";
    let connect = format!(
        "the Host header names \"internal.other.example:{port}\", not the target {target} {rule}"
    );
    let got: Vec<String> = stdout(&r).lines().map(str::to_string).collect();
    assert_eq!(
        got,
        [
            format!("mismatch|400|prims egress: {mismatch}"),
            format!("twice|400|prims egress: {twice}"),
            format!("bare-lf|400|prims egress: {bare_lf}"),
            format!("connect|400|prims egress: {connect}"),
            "match|200|hello".to_string(),
        ],
        "{}",
        stderr(&r)
    );
    // The upstream saw one connection: the matching request, with the Host
    // the proxy wrote from its target.
    assert_eq!(up.connections(), 1, "{:?}", up.heads());
    assert_eq!(
        up.heads(),
        [format!(
            "GET /ok HTTP/1.1\r\nHost: {target}\r\nConnection: close\r\n\r\n"
        )]
    );
    let net = r.network.expect("a network report");
    let allowed: Vec<(&str, u16, u64)> = net
        .allowed
        .iter()
        .map(|a| (a.host.as_str(), a.port, a.connections))
        .collect();
    assert_eq!(allowed, [("files.test.example", port, 1)]);
    let denied: Vec<(&str, u16, &str)> = net
        .denied
        .iter()
        .map(|d| (d.host.as_str(), d.port, d.reason.as_str()))
        .collect();
    assert_eq!(
        denied,
        [
            ("files.test.example", port, mismatch.as_str()),
            ("files.test.example", port, twice),
            ("files.test.example", port, bare_lf),
            ("files.test.example", port, connect.as_str()),
        ]
    );
    // And the admin's audit log has each, with its reason.
    let log = std::fs::read_to_string(d.state.join("audit.log")).unwrap();
    let reasons: Vec<String> = log
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["event"] == "egress" && v["decision"] == "denied")
        .map(|v| {
            format!(
                "{}:{} {}",
                v["host"].as_str().unwrap(),
                v["port"],
                v["reason"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        reasons,
        [
            format!("{target} {mismatch}"),
            format!("{target} {twice}"),
            format!("{target} {bare_lf}"),
            format!("{target} {connect}"),
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn code_that_ignores_the_proxy_fails_fast() {
    let up = upstream().await;
    let d = daemon(up.addr);
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap().session_id;
    let code = r#"
import errno, socket, time
for host, port in (("10.1.2.3", 80), ("151.101.0.223", 443), ("127.0.0.1", 22)):
    t = time.monotonic()
    s = socket.socket()
    s.settimeout(20)
    try:
        s.connect((host, port))
        print(host, "connected")
    except OSError as e:
        print(host, errno.errorcode.get(e.errno, e.errno), round(time.monotonic() - t, 3))
t = time.monotonic()
try:
    socket.getaddrinfo("pypi.org", 443)
    print("dns resolved")
except OSError as e:
    print("dns", type(e).__name__, round(time.monotonic() - t, 3))
"#;
    let r = send(&c, run_req(&s, code)).await;
    assert_eq!(r.outcome.status, Status::Ok, "{}", stderr(&r));
    let got = lines(&r);
    // No route leaves the jail's network namespace; its loopback is its own,
    // where nothing listens on 22.
    let errnos: Vec<&str> = got[..3].iter().map(|l| l[1].as_str()).collect();
    assert_eq!(
        errnos,
        ["ENETUNREACH", "ENETUNREACH", "ECONNREFUSED"],
        "{got:?}"
    );
    for l in &got[..3] {
        assert!(l[2].parse::<f64>().unwrap() < 1.0, "{got:?}");
    }
    assert_eq!(got[3][0], "dns", "{got:?}");
    assert!(got[3][2].parse::<f64>().unwrap() < 5.0, "{got:?}");
}

/// The jail's loopback is its own in allowlist mode too: its servers work,
/// and of every port there, only the proxy's listener answers, which no
/// code in the jail can take over.
#[tokio::test(flavor = "multi_thread")]
async fn the_proxys_port_stays_the_only_way_out_of_the_jails_loopback() {
    let up = upstream().await;
    let d = daemon(up.addr);
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap().session_id;
    let code = r#"
import errno, socket
for family, host in ((socket.AF_INET, '127.0.0.1'), (socket.AF_INET6, '::1')):
    answered = []
    for port in range(1, 65536):
        with socket.socket(family) as p:
            # A socket whose ephemeral port is the one it dials connects
            # to itself (TCP's simultaneous open): nobody answered.
            if p.connect_ex((host, port)) == 0 and p.getsockname() != p.getpeername():
                answered.append(port)
    print('answered', host, answered)
for host, family, option in (('127.0.0.1', socket.AF_INET, None),
                             ('0.0.0.0', socket.AF_INET, socket.SO_REUSEADDR),
                             ('127.0.0.1', socket.AF_INET, socket.SO_REUSEPORT),
                             ('::', socket.AF_INET6, socket.SO_REUSEPORT)):
    with socket.socket(family) as t:
        if option is not None:
            t.setsockopt(socket.SOL_SOCKET, option, 1)
        try:
            t.bind((host, 3128))
            t.listen()
            print('take', host, 'taken')
        except OSError as e:
            print('take', host, errno.errorcode[e.errno])
l = socket.socket()
l.bind(('127.0.0.1', 0))
l.listen()
u = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
u.bind(('::1', 0))
socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).sendto(b'x', u.getsockname()[:2])
print('own', socket.create_connection(l.getsockname()).fileno() > 0, u.recv(1))
fetch('http://files.test.example:%d/ok')
"#;
    let code = format!("{FETCH}\n{}", code.replace("%d", &up.port().to_string()));
    let mut req = run_req(&s, &code);
    req.limits.wall_time_ms = Some(60_000);
    let r = send(&c, req).await;
    assert_eq!(r.outcome.status, Status::Ok, "{}", stderr(&r));
    let out = stdout(&r);
    let want = "answered 127.0.0.1 [3128]\n\
                answered ::1 []\n\
                take 127.0.0.1 EADDRINUSE\n\
                take 0.0.0.0 EADDRINUSE\n\
                take 127.0.0.1 EADDRINUSE\n\
                take :: EADDRINUSE\n\
                own True b'x'\n";
    assert!(out.starts_with(want), "{out}");
    // And the proxy still serves the list.
    assert!(out.lines().last().unwrap_or("").starts_with("OK "), "{out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_narrows_the_list_and_hears_what_it_asked_for_in_vain() {
    let up = upstream().await;
    let d = daemon(up.addr);
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap().session_id;
    let port = up.port();
    let code = format!("{FETCH}\nfetch('http://files.test.example:{port}/ok')\n");
    let req = RunRequest {
        network: Some(vec!["x.other.example".into(), "pypi.org".into()]),
        ..run_req(&s, &code)
    };
    let r = send(&c, req).await;
    let got = lines(&r);
    assert_eq!(
        got[0][..3],
        [
            "HTTP",
            &format!("http://files.test.example:{port}/ok"),
            "403"
        ]
    );
    let net = r.network.expect("a network report");
    assert_eq!(net.ignored, ["pypi.org"]);
    assert_eq!(
        net.denied[0].reason,
        "files.test.example is not in the allow-list"
    );
    // The next call without `network` has the whole list again, in the
    // same interpreter.
    let again = send(
        &c,
        run_req(&s, &format!("fetch('http://files.test.example:{port}/ok')")),
    )
    .await;
    assert!(stdout(&again).starts_with("OK "), "{}", stdout(&again));
    assert_eq!(
        again.interpreter.state,
        prims_protocol::wire::InterpreterState::Kept
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn max_bytes_cuts_a_download_in_the_jail() {
    let up = upstream().await;
    let d = daemon_with(up.addr, "max_bytes = \"1MiB\"");
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap().session_id;
    let port = up.port();
    let code = format!(
        "import urllib.request\n\
         n = 0\n\
         try:\n\
         \x20   with urllib.request.urlopen('http://files.test.example:{port}/big', timeout=20) as r:\n\
         \x20       while chunk := r.read(65536):\n\
         \x20           n += len(chunk)\n\
         except Exception as e:\n\
         \x20   print('cut', type(e).__name__)\n\
         print('read', n)\n"
    );
    let r = send(&c, run_req(&s, &code)).await;
    let out = stdout(&r);
    let read: usize = out
        .lines()
        .find_map(|l| l.strip_prefix("read "))
        .unwrap_or_else(|| panic!("{out}\n{}", stderr(&r)))
        .parse()
        .unwrap();
    assert!(
        read < 1 << 20,
        "{read} bytes of {BIG} came through a 1 MiB budget"
    );
    let net = r.network.expect("a network report");
    assert!(
        net.denied
            .iter()
            .any(|d| d.reason.starts_with("cut:") && d.port == port),
        "{net:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn eight_concurrent_runs_never_see_each_others_lists() {
    let up = upstream().await;
    let port = up.port();
    let d = daemon(up.addr);
    let c = d.client().await;
    let mut sessions = Vec::new();
    for _ in 0..8 {
        sessions.push(c.open_session(None).await.unwrap().session_id);
    }
    let fetch_all: String = (0..8)
        .map(|i| format!("fetch('http://h{i}.other.example:{port}/ok')\n"))
        .collect();
    let runs = sessions.iter().enumerate().map(|(i, s)| {
        let c = &c;
        let req = RunRequest {
            network: Some(vec![
                format!("h{i}.other.example:{port}"),
                format!("{}:{port}", up.addr.ip()),
            ]),
            ..run_req(s, &format!("{FETCH}\n{fetch_all}"))
        };
        async move { send(c, req).await }
    });
    let replies = futures::future::join_all(runs).await;
    for (i, r) in replies.iter().enumerate() {
        let got = lines(r);
        let ok: Vec<&str> = got
            .iter()
            .filter(|l| l[0] == "OK")
            .map(|l| l[1].as_str())
            .collect();
        assert_eq!(
            ok,
            [format!("http://h{i}.other.example:{port}/ok")],
            "run {i}: {got:?}"
        );
        let net = r.network.as_ref().expect("a network report");
        assert_eq!(net.allowed.len(), 1, "run {i}: {net:?}");
        assert_eq!(net.allowed[0].host, format!("h{i}.other.example"));
        assert_eq!(net.denied.len(), 7, "run {i}: {net:?}");
        assert!(net.denied.iter().all(|d| d.host != net.allowed[0].host));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_connections_from_one_run_leaves_another_served() {
    let up = upstream().await;
    let port = up.port();
    let d = daemon(up.addr);
    let c = d.client().await;
    let a = c.open_session(None).await.unwrap().session_id;
    let b = c.open_session(None).await.unwrap().session_id;
    // Warm both interpreters first, so the timings below are the proxy's.
    send(&c, run_req(&a, "1")).await;
    send(&c, run_req(&b, FETCH)).await;
    // A holds 200 connections to its proxy listener open, saying nothing.
    let flood = r#"
import socket, time
held = []
for i in range(200):
    s = socket.socket()
    s.setblocking(False)
    try:
        s.connect(("127.0.0.1", 3128))
    except BlockingIOError:
        pass
    held.append(s)
open("flooding", "w").close()
time.sleep(6)
print("held", len(held))
"#;
    let flooding = d.workspace(&a).join("flooding");
    let fetches = format!(
        "import time\nworst = 0\nfor _ in range(5):\n    t = time.monotonic()\n    fetch('http://files.test.example:{port}/ok')\n    worst = max(worst, time.monotonic() - t)\nprint('worst', round(worst, 3))\n"
    );
    let (ra, rb) = tokio::join!(send(&c, run_req(&a, flood)), async {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !flooding.exists() && std::time::Instant::now() < until {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        send(&c, run_req(&b, &fetches)).await
    });
    assert!(
        stdout(&ra).contains("held 200"),
        "{}{}",
        stdout(&ra),
        stderr(&ra)
    );
    let out = stdout(&rb);
    assert_eq!(out.matches("OK ").count(), 5, "{out}");
    let worst: f64 = out
        .lines()
        .find_map(|l| l.strip_prefix("worst "))
        .unwrap_or_else(|| panic!("{out}"))
        .parse()
        .unwrap();
    // A hang guard, not a speed measure: B is never queued behind A.
    assert!(worst < 2.0, "a fetch took {worst} s during the flood");
}

#[tokio::test(flavor = "multi_thread")]
async fn https_goes_end_to_end_through_a_connect_tunnel() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = web::certificate(dir.path(), "files.test.example");
    let mut host = NetnsHost::new();
    let ns = host.addr;
    let port = web::in_netns(&mut host, 0, "secret", Some((&cert, &key)));
    let cert = std::fs::read(&cert).unwrap();
    let policy = format!(
        "[network]\nmode = \"allowlist\"\nallow = [{{ host = \"files.test.example:{port}\", tls = \"passthrough\" }}, \"{ns}:{port}\"]\n\
         [interpreters]\npool_size = 0\n"
    );
    let d = Daemon::start_with_args(
        &policy,
        &["--egress-resolve", &format!("files.test.example={ns}")],
    );
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap().session_id;
    std::fs::write(d.workspace(&s).join("ca.pem"), &cert).unwrap();
    // A passed-through tunnel: the jail verifies the server's certificate
    // itself, and the proxy only relays the bytes.
    let code = format!(
        "import ssl, urllib.request\n\
         ctx = ssl.create_default_context(cafile='/workspace/ca.pem')\n\
         print(urllib.request.urlopen('https://files.test.example:{port}/x', context=ctx, timeout=20).read().decode())\n"
    );
    let r = send(&c, run_req(&s, &code)).await;
    assert_eq!(stdout(&r), "secret\n", "{}", stderr(&r));
    let net = r.network.expect("a network report");
    assert_eq!(net.allowed.len(), 1, "{net:?}");
    assert_eq!(
        (net.allowed[0].host.as_str(), net.allowed[0].port),
        ("files.test.example", port)
    );
    // A TLS handshake and a request: far more than the six bytes of body.
    assert!(net.allowed[0].bytes > 1000, "{net:?}");
}

/// A wheel of `tinypkg` 1.0 (`tinypkg.VALUE == 42`), made by the host's python.
fn tiny_wheel() -> Vec<u8> {
    let script = r#"
import base64, hashlib, io, sys, zipfile
files = {
    "tinypkg/__init__.py": b"VALUE = 42\n",
    "tinypkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n",
    "tinypkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: prims-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
for name, data in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record.append("%s,sha256=%s,%d" % (name, digest, len(data)))
record.append("tinypkg-1.0.dist-info/RECORD,,")
files["tinypkg-1.0.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
out = io.BytesIO()
with zipfile.ZipFile(out, "w") as z:
    for name, data in files.items():
        z.writestr(name, data)
sys.stdout.buffer.write(out.getvalue())
"#;
    let out = std::process::Command::new("/usr/bin/python3")
        .args(["-c", script])
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// A package index serving only `tinypkg`.
async fn index(wheel: Vec<u8>) -> Server {
    Server::start(move |req, mut c| {
        let wheel = wheel.clone();
        async move {
            let path = req.path();
            let (kind, body): (&str, Vec<u8>) = if path.starts_with("/simple/tinypkg") {
                let html = "<html><body><a href=\"/files/tinypkg-1.0-py3-none-any.whl\">tinypkg-1.0-py3-none-any.whl</a></body></html>";
                ("text/html", html.as_bytes().to_vec())
            } else if path.starts_with("/files/tinypkg-1.0-py3-none-any.whl") {
                ("application/octet-stream", wheel)
            } else {
                let _ = c
                    .write_all(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    )
                    .await;
                return;
            };
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = c.write_all(head.as_bytes()).await;
            let _ = c.write_all(&body).await;
        }
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn pip_install_in_a_running_session_is_importable_in_the_next_cell() {
    let idx = index(tiny_wheel()).await;
    let port = idx.port();
    let d = daemon(idx.addr);
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap().session_id;
    // pip itself comes from the environment (a requirement like any other).
    let install = format!(
        "import subprocess, sys\n\
         r = subprocess.run([sys.executable, '-m', 'pip', 'install', '--index-url',\n\
         \x20   'http://files.test.example:{port}/simple/', '--trusted-host', 'files.test.example',\n\
         \x20   '--target', '/workspace/.prims/site-packages', 'tinypkg'],\n\
         \x20   capture_output=True, text=True)\n\
         print(r.returncode)\n\
         print(r.stderr[-2000:], file=sys.stderr)\n"
    );
    let req = RunRequest {
        requirements: vec!["pip".into()],
        ..run_req(&s, &install)
    };
    let r = send(&c, req).await;
    assert_eq!(stdout(&r), "0\n", "{}", stderr(&r));
    let net = r.network.expect("a network report");
    assert!(
        net.allowed
            .iter()
            .any(|a| a.host == "files.test.example" && a.port == port),
        "{net:?}"
    );
    assert!(d
        .workspace(&s)
        .join(".prims/site-packages/tinypkg/__init__.py")
        .is_file());
    let used = RunRequest {
        requirements: vec!["pip".into()],
        ..run_req(&s, "import tinypkg\ntinypkg.VALUE")
    };
    let r = send(&c, used).await;
    assert_eq!(
        r.interpreter.result.as_deref(),
        Some("42"),
        "{}",
        stderr(&r)
    );
    assert_eq!(
        r.interpreter.state,
        prims_protocol::wire::InterpreterState::Kept
    );
}
