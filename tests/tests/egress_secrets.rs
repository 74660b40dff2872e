//! Secrets placed by the egress proxy, on a real supervisor: jailed code
//! holds a placeholder, and the upstream (a TLS server of the test's own,
//! in a network namespace of its own, with a CA the policy names in
//! `network.upstream_ca`) receives the value, in the one header and for
//! the one host the policy names. Everywhere else the placeholder is
//! refused, and the refusal is in the call's `network.denied`. TLS is
//! inspected: a fronted `Host`, and an upstream no root vouches for, are
//! refused whatever the client asks. The value is in no result, log or
//! file of the state directory.

use prims_protocol::wire::RunReply;
use prims_tests::daemon::{run_req, Daemon};
use prims_tests::live::{send, stderr, stdout};
use prims_tests::netns::NetnsHost;
use prims_tests::tls_upstream::{TestCa, TlsUpstream};
use std::path::Path;
use std::time::Duration;

const API: &str = "api.test.example";
const OTHER: &str = "other.test.example";
const ROGUE: &str = "rogue.test.example";
const VALUE: &str = "sk-live-7d1f0c9e4b2a8e6f";
const ROTATED: &str = "sk-live-rotated-55aa01";
const S3_KEY_ID: &str = "AKIAPRIMSTESTKEY0001";
const S3_SECRET: &str = "s3-real-secret/K7MDENG+bPxRfiCYEXAMPLE";

struct World {
    d: Daemon,
    api: TlsUpstream,
    _rogue: TlsUpstream,
    _ns: NetnsHost,
    port: u16,
    rogue_port: u16,
    /// The policy's sections of the test's, and where its files are.
    extra: String,
    dir: std::path::PathBuf,
}

fn policy(dir: &Path, ip: std::net::Ipv4Addr, ports: (u16, u16)) -> String {
    format!(
        "[network]\nmode = \"allowlist\"\nports = [{}, {}]\n\
         allow = [\"{API}\", \"{OTHER}\", \"{ROGUE}\", \"{ip}\"]\n\
         upstream_ca = [\"{}\"]\n\
         [secrets.EXAMPLE_TOKEN]\nfile = \"{}\"\nhosts = [\"{API}\"]\n\
         [secrets.S3]\nkind = \"aws\"\naccess_key_id = \"{S3_KEY_ID}\"\nfile = \"{}\"\n\
         hosts = [\"{API}\"]\n\
         [interpreters]\npool_size = 0\n",
        ports.0,
        ports.1,
        dir.join("test-ca.pem").display(),
        dir.join("example-token").display(),
        dir.join("s3-secret").display(),
    )
}

async fn world() -> World {
    let ns = NetnsHost::new();
    let ca = TestCa::new("PRIMS test upstream CA");
    let api_listener = ns.listen(0);
    let port = api_listener.local_addr().unwrap().port();
    let api = TlsUpstream::serve(api_listener, ca.server_config(&[API, OTHER]));
    // A server no root of the proxy's vouches for.
    let rogue_ca = TestCa::new("someone else's CA");
    let rogue_listener = ns.listen(0);
    let rogue_port = rogue_listener.local_addr().unwrap().port();
    let rogue = TlsUpstream::serve(rogue_listener, rogue_ca.server_config(&[ROGUE]));
    let dir = tempfile::tempdir().unwrap().keep();
    std::fs::write(dir.join("test-ca.pem"), &ca.pem).unwrap();
    std::fs::write(dir.join("example-token"), format!("{VALUE}\n")).unwrap();
    std::fs::write(dir.join("s3-secret"), S3_SECRET).unwrap();
    let ip = ns.addr;
    let args: Vec<String> = [API, OTHER, ROGUE]
        .iter()
        .flat_map(|n| ["--egress-resolve".to_string(), format!("{n}={ip}")])
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let extra = policy(&dir, ip, (port, rogue_port));
    let d = Daemon::start_with_args(&extra, &args);
    World {
        d,
        extra,
        dir,
        api,
        _rogue: rogue,
        _ns: ns,
        port,
        rogue_port,
    }
}

/// The jail's client: urllib, as any code would use it, through the proxy
/// its environment names and the CA bundle it names.
const CALL: &str = r#"
import base64, json, os, ssl, urllib.request, urllib.error
TOKEN = os.environ["EXAMPLE_TOKEN"]
def call(url, headers=None, data=None, context=None):
    req = urllib.request.Request(url, headers=headers or {}, data=data)
    try:
        with urllib.request.urlopen(req, timeout=20, context=context) as r:
            return ["OK", r.status, r.read().decode()]
    except urllib.error.HTTPError as e:
        return ["HTTP", e.code, e.read().decode()]
    except Exception as e:
        return ["ERR", type(e).__name__, str(e)]
"#;

fn outcome(r: &RunReply) -> serde_json::Value {
    let out = stdout(r);
    let last = out.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {out}\n{}", stderr(r)))
}

async fn run(c: &prims_protocol::client::Client, s: &str, code: &str) -> RunReply {
    send(c, run_req(s, &format!("{CALL}\n{code}"))).await
}

#[tokio::test(flavor = "multi_thread")]
async fn egress_secrets_are_placed_only_in_their_header_for_their_host() {
    let w = world().await;
    let c = w.d.client().await;
    let s = c.open_session(None).await.unwrap().session_id;
    let (p, q) = (w.port, w.rogue_port);
    let code = format!(
        "api = 'https://{API}:{p}/v1/echo'\n\
         basic = base64.b64encode(('user:' + TOKEN).encode()).decode()\n\
         print(json.dumps({{\n\
         'token': TOKEN,\n\
         'bearer': call(api, {{'Authorization': 'Bearer ' + TOKEN}}),\n\
         'basic': call(api, {{'Authorization': 'Basic ' + basic}}),\n\
         'other_host': call('https://{OTHER}:{p}/', {{'Authorization': 'Bearer ' + TOKEN}}),\n\
         'other_header': call(api, {{'X-Api-Key': TOKEN}}),\n\
         'url': call(api + '?key=' + TOKEN),\n\
         'body': call(api, data=('token=' + TOKEN).encode()),\n\
         'plain': call('http://{API}:{p}/', {{'Authorization': 'Bearer ' + TOKEN}}),\n\
         'fronted': call(api, {{'Host': '{OTHER}:{p}'}}),\n\
         'untrusted': call('https://{ROGUE}:{q}/'),\n\
         'unverified': call('https://{ROGUE}:{q}/', context=ssl._create_unverified_context()),\n\
         'bundle': os.environ.get('SSL_CERT_FILE'),\n\
         }}))\n"
    );
    let r = run(&c, &s, &code).await;
    let o = outcome(&r);
    let token = o["token"].as_str().unwrap().to_string();
    assert!(token.starts_with("prims-secret-"), "{token}");
    assert_eq!(o["bundle"], "/etc/prims/ca-bundle.pem");

    // Bearer and Basic: the upstream got the value, the jail read back the
    // placeholder in its echo.
    for (key, want) in [
        ("bearer", format!("Bearer {VALUE}")),
        (
            "basic",
            format!("Basic {}", base64_of(&format!("user:{VALUE}"))),
        ),
    ] {
        let got = &o[key];
        assert_eq!(
            (&got[0], &got[1]),
            (&"OK".into(), &200.into()),
            "{key}: {got}"
        );
        assert!(!got[2].as_str().unwrap().contains(VALUE), "{key}: {got}");
        let received = w.api.received();
        assert!(
            received.iter().any(|r| r.head.contains(&want)),
            "{key}: the upstream never got {want:?}: {received:?}"
        );
    }
    assert!(
        o["bearer"][2].as_str().unwrap().contains(&token),
        "{}",
        o["bearer"]
    );

    // Everywhere else: refused, saying where it may go.
    for (key, why) in [
        (
            "other_host",
            format!("was sent to {OTHER}, which is not among its hosts"),
        ),
        (
            "other_header",
            "is in the x-api-key header, where it is never placed".into(),
        ),
        ("url", "is in the URL, where it is never placed".into()),
        (
            "body",
            "is in the request's body, where it is never placed".into(),
        ),
        (
            "plain",
            "was sent over plain HTTP, where it is never placed".into(),
        ),
        ("fronted", "domain fronting is refused".into()),
    ] {
        let got = &o[key];
        assert_eq!(
            (&got[0], &got[1]),
            (&"HTTP".into(), &403.into()),
            "{key}: {got}"
        );
        assert!(got[2].as_str().unwrap().contains(&why), "{key}: {got}");
    }
    // An upstream no root vouches for, whatever the client would accept.
    for key in ["untrusted", "unverified"] {
        let got = &o[key];
        assert_eq!(
            (&got[0], &got[1]),
            (&"HTTP".into(), &502.into()),
            "{key}: {got}"
        );
        assert!(
            got[2].as_str().unwrap().contains("UnknownIssuer"),
            "{key}: {got}"
        );
    }
    let net = r.network.clone().expect("a network report");
    let reasons: Vec<&str> = net.denied.iter().map(|d| d.reason.as_str()).collect();
    for why in [
        "is not among its hosts",
        "x-api-key header",
        "in the URL",
        "request's body",
        "over plain HTTP",
        "domain fronting",
        "UnknownIssuer",
    ] {
        assert!(
            reasons.iter().any(|r| r.contains(why)),
            "{why}: {reasons:?}"
        );
    }
    // No refused request reached the upstream whole.
    assert_eq!(w.api.received().len(), 2, "{:?}", w.api.received());
    assert_no_value(&w, &r, VALUE);

    // A rotation: the next request carries the new value, under the same
    // placeholder, in the same live session.
    std::fs::write(w.dir.join("example-token"), ROTATED).unwrap();
    w.d.reload_and_wait(&w.extra, Duration::from_secs(20));
    let again = format!(
        "print(json.dumps({{'token': TOKEN, 'bearer': call('https://{API}:{p}/v1/echo', \
         {{'Authorization': 'Bearer ' + TOKEN}})}}))\n"
    );
    let r = run(&c, &s, &again).await;
    let o = outcome(&r);
    assert_eq!(o["token"].as_str(), Some(token.as_str()));
    assert_eq!(o["bearer"][1], 200, "{}", o["bearer"]);
    let last = w.api.received().pop().expect("a request");
    assert!(last.head.contains(&format!("Bearer {ROTATED}")), "{last:?}");
    assert_no_value(&w, &r, ROTATED);

    // A branch carries the placeholder (in a saved global, and in its
    // environment), never the value, and the placeholder works there.
    let keep = run(&c, &s, "kept = TOKEN\nprint(json.dumps([]))\n").await;
    assert_eq!(
        keep.outcome.status,
        prims_protocol::jail::Status::Ok,
        "{}",
        stderr(&keep)
    );
    let f = c.fork_session(&s, None, 1).await.expect("a branch");
    let branch = &f.sessions[0].session_id;
    let in_branch = format!(
        "print(json.dumps({{'same': kept == os.environ['EXAMPLE_TOKEN'], 'bearer': \
         call('https://{API}:{p}/v1/echo', {{'Authorization': 'Bearer ' + kept}})}}))\n"
    );
    let r = run(&c, branch, &in_branch).await;
    let o = outcome(&r);
    assert_eq!(o["same"], true, "{o}");
    assert_eq!(o["bearer"][1], 200, "{}", o["bearer"]);
    let last = w.api.received().pop().expect("a request");
    assert!(last.head.contains(&format!("Bearer {ROTATED}")), "{last:?}");
    assert_no_value(&w, &r, ROTATED);
}

fn base64_of(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// The value is in no result, log line or file of the state directory.
fn assert_no_value(w: &World, r: &RunReply, value: &str) {
    let reply = serde_json::to_string(r).unwrap();
    assert!(!reply.contains(value), "the result holds the value");
    assert!(
        !w.d.log().contains(value),
        "the supervisor's log holds the value"
    );
    let mut stack = vec![w.d.state.clone()];
    while let Some(p) = stack.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if meta.is_dir() {
            if let Ok(rd) = std::fs::read_dir(&p) {
                stack.extend(rd.flatten().map(|e| e.path()));
            }
        } else if meta.is_file() && meta.len() < 256 << 20 {
            if let Ok(bytes) = std::fs::read(&p) {
                assert!(
                    !bytes.windows(value.len()).any(|w| w == value.as_bytes()),
                    "{} holds the value",
                    p.display()
                );
            }
        }
    }
}

/// The clients code really uses: requests and httpx place a token, and
/// boto3's S3 client, signing with the session's placeholder keys, has its
/// request signed again with the real ones, as S3 checks it.
#[tokio::test(flavor = "multi_thread")]
async fn egress_secrets_serve_requests_httpx_and_boto3_unchanged() {
    let w = world().await;
    let c = w.d.client().await;
    let s = c.open_session(None).await.unwrap().session_id;
    let p = w.port;
    let code = format!(
        "import json, os, boto3, httpx, requests\n\
         api = 'https://{API}:{p}/v1/echo'\n\
         auth = {{'Authorization': 'Bearer ' + os.environ['EXAMPLE_TOKEN']}}\n\
         r = requests.get(api, headers=auth, timeout=20)\n\
         h = httpx.get(api, headers=auth, timeout=20)\n\
         s3 = boto3.client('s3', endpoint_url='https://{API}:{p}', region_name='us-east-1')\n\
         import botocore.exceptions\n\
         try:\n\
         \x20   s3.put_object(Bucket='bucket', Key='hello.txt', Body=b'hello')\n\
         except botocore.exceptions.ClientError as e:\n\
         \x20   print('S3 error', e.response)\n\
         print(json.dumps({{'requests': [r.status_code, r.text], 'httpx': [h.status_code, h.text], \
         'key_id': os.environ['AWS_ACCESS_KEY_ID']}}))\n"
    );
    let req = prims_protocol::wire::RunRequest {
        requirements: vec!["requests".into(), "httpx".into(), "boto3".into()],
        ..run_req(&s, &code)
    };
    let r = send(&c, req).await;
    let o = outcome(&r);
    for client in ["requests", "httpx"] {
        assert_eq!(o[client][0], 200, "{client}: {}", o[client]);
        assert!(!o[client][1].as_str().unwrap().contains(VALUE), "{client}");
    }
    let received = w.api.received();
    let bearers = received
        .iter()
        .filter(|r| r.head.contains(&format!("Bearer {VALUE}")))
        .count();
    assert_eq!(bearers, 2, "{received:?}");
    // The jail signed with its placeholders; S3 saw the real key's signature.
    let key_id = o["key_id"].as_str().unwrap();
    assert_ne!(key_id, S3_KEY_ID);
    let put = received
        .iter()
        .find(|r| r.head.starts_with("PUT /bucket/hello.txt"))
        .unwrap_or_else(|| panic!("no PUT: {}\n{received:?}", stdout(&r)));
    let (method, target, headers) = parsed(&put.head);
    prims_egress::secrets::aws::check(S3_KEY_ID, S3_SECRET, &method, &target, &headers)
        .unwrap_or_else(|e| panic!("{e}: {}", put.head));
    assert!(!put.head.contains(key_id), "{}", put.head);
    assert_no_value(&w, &r, S3_SECRET);
    assert!(!serde_json::to_string(&r).unwrap().contains(S3_KEY_ID));
}

/// A recorded head's method, target and headers.
fn parsed(head: &str) -> (String, String, http::HeaderMap) {
    let mut lines = head.split("\r\n");
    let first: Vec<&str> = lines.next().unwrap_or_default().split(' ').collect();
    let mut headers = http::HeaderMap::new();
    for l in lines.filter(|l| !l.is_empty()) {
        let (k, v) = l.split_once(':').expect("a header line");
        headers.append(
            http::HeaderName::from_bytes(k.trim().to_ascii_lowercase().as_bytes()).unwrap(),
            http::HeaderValue::from_str(v.trim()).unwrap(),
        );
    }
    (first[0].to_string(), first[1].to_string(), headers)
}
