//! What inspecting TLS costs: HTTPS requests through the real `prims
//! egress-proxy` process, each to the same TLS server on this host, once
//! through a tunnel (TLS end to end, as `tls = "passthrough"` gives) and
//! once inspected (TLS ended at the proxy, the upstream verified by it),
//! interleaved in one run. Python's `http.client` is the client: on a
//! connection kept alive (a session's requests after its first to a
//! host), and on a new connection each time.

use crate::stats::stats;
use anyhow::{bail, Context, Result};
use prims_egress::control::ToProxy;
use prims_egress::decide::Rules;
use prims_egress::run::Budget;
use prims_egress::secrets::SecretText;
use prims_egress::tls::authority;
use prims_policy::network::{parse_allow_entry, AllowList};
use prims_supervisor::egress::EgressProxy;
use prims_tests::tls_upstream::{TestCa, TlsUpstream};
use std::path::PathBuf;

pub fn main(runs: usize, prims: PathBuf) -> Result<()> {
    if runs < 20 {
        bail!("--runs must be at least 20");
    }
    // SAFETY: a plain getter.
    if unsafe { libc::geteuid() } != 0 {
        bail!("run as root: the proxy process starts as root and drops to its own account");
    }
    tokio::runtime::Runtime::new()?.block_on(measure(runs, prims))
}

async fn measure(runs: usize, prims: PathBuf) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let test_ca = TestCa::new("bench upstream CA");
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    let up = l.local_addr()?;
    let _upstream = TlsUpstream::serve(l, test_ca.server_config(&["127.0.0.1"]));
    let ca = authority::load_or_create(dir.path()).context("the inspection CA")?;
    // The client trusts the upstream (tunnelled) and the proxy's CA
    // (inspected), as a jail's bundle does.
    let bundle = dir.path().join("bundle.pem");
    std::fs::write(&bundle, format!("{}{}", test_ca.pem, ca.cert))?;
    let proxy = EgressProxy::new(prims, vec![], prims_tests::egress_account());
    proxy
        .configure(ToProxy::Configure {
            ca_cert: ca.cert.clone(),
            ca_key: SecretText::new(ca.key.to_string()),
            upstream_ca: vec![test_ca.pem.clone()],
            secrets: Vec::new(),
        })
        .await?;
    let entries = vec![parse_allow_entry(&up.to_string()).map_err(anyhow::Error::msg)?];
    let budget = Budget {
        max_bytes: u64::MAX,
        max_connections: u64::MAX,
    };
    let mut vias = Vec::new();
    let mut jails = Vec::new();
    for inspect in [false, true] {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        vias.push(l.local_addr()?);
        let jail = proxy
            .attach(l.into())
            .await
            .context("attaching a listener")?;
        let rules = Rules {
            list: AllowList::new(&entries, &[]),
            inspect,
            ..Rules::default()
        };
        let run = jail.begin(&rules, budget).await?;
        jails.push((jail, run));
    }
    let out = tokio::process::Command::new("/usr/bin/python3")
        .args(["-c", CLIENT])
        .arg(vias[0].to_string())
        .arg(vias[1].to_string())
        .arg(up.port().to_string())
        .arg(&bundle)
        .arg(runs.to_string())
        .output()
        .await
        .context("running /usr/bin/python3")?;
    if !out.status.success() {
        bail!(
            "the client failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let t: Timings = serde_json::from_slice(&out.stdout).context("the client's timings")?;
    for (jail, run) in jails {
        jail.end(run).await;
    }
    println!("HTTPS requests to a TLS server on this host, {runs} of each, interleaved (python http.client):");
    println!("| connection | path | p50 ms | p90 ms | min ms | p50 added |");
    println!("|---|---|---|---|---|---|");
    row(
        "kept alive (after the first)",
        t.kept_tunnel,
        t.kept_inspected,
    );
    row("new for each request", t.new_tunnel, t.new_inspected);
    Ok(())
}

#[derive(serde::Deserialize)]
struct Timings {
    kept_tunnel: Vec<f64>,
    kept_inspected: Vec<f64>,
    new_tunnel: Vec<f64>,
    new_inspected: Vec<f64>,
}

fn row(what: &str, tunnel: Vec<f64>, inspected: Vec<f64>) {
    let (t, i) = (stats(tunnel), stats(inspected));
    println!(
        "| {what} | tunnel | {:.2} | {:.2} | {:.2} | — |",
        t.median, t.p90, t.min
    );
    println!(
        "| {what} | inspected | {:.2} | {:.2} | {:.2} | {:+.2} ms |",
        i.median,
        i.p90,
        i.min,
        i.median - t.median
    );
}

const CLIENT: &str = r#"
import http.client, json, ssl, sys, time
tunnel, inspected, port, bundle, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
ctx = ssl.create_default_context(cafile=bundle)
def connect(via):
    h, p = via.rsplit(":", 1)
    c = http.client.HTTPSConnection(h, int(p), context=ctx, timeout=20)
    c.set_tunnel("127.0.0.1", port)
    return c
def get(c):
    t = time.perf_counter()
    c.request("GET", "/x")
    r = c.getresponse()
    r.read()
    if r.status != 200:
        sys.exit("status %d" % r.status)
    return (time.perf_counter() - t) * 1000
def fresh(via):
    t = time.perf_counter()
    c = connect(via)
    get(c)
    c.close()
    return (time.perf_counter() - t) * 1000
ct, ci = connect(tunnel), connect(inspected)
get(ct), get(ci)
kt, ki, nt, ni = [], [], [], []
for _ in range(runs):
    kt.append(get(ct))
    ki.append(get(ci))
for _ in range(3):
    fresh(tunnel), fresh(inspected)
for _ in range(runs):
    nt.append(fresh(tunnel))
    ni.append(fresh(inspected))
print(json.dumps({"kept_tunnel": kt, "kept_inspected": ki, "new_tunnel": nt, "new_inspected": ni}))
"#;
