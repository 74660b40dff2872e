//! The egress proxy's cost: a 1 MiB HTTP download from a server on this
//! host, directly and through the real `prims egress-proxy` process,
//! interleaved in one run, from a server on loopback and from one across a
//! 1 Gbit/s veth link to a network namespace. Two clients: python's urllib, as jailed code
//! downloads, and a bare Rust client (plain HTTP and a CONNECT tunnel),
//! which leaves nothing but the proxy's own cost to see.

use crate::stats::stats;
use anyhow::{bail, Context, Result};
use prims_egress::decide::Rules;
use prims_egress::run::Budget;
use prims_policy::network::{parse_allow_entry, AllowList};
use prims_supervisor::egress::EgressProxy;
use prims_tests::netns::NetnsHost;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub fn main(runs: usize, size: usize, prims: PathBuf) -> Result<()> {
    if runs < 20 {
        bail!("--runs must be at least 20");
    }
    // SAFETY: a plain getter.
    if unsafe { libc::geteuid() } != 0 {
        bail!("run as root: the proxy process starts as root and drops to nobody");
    }
    tokio::runtime::Runtime::new()?.block_on(measure(runs, size, prims))
}

fn server(l: std::net::TcpListener, size: usize) -> Result<SocketAddr> {
    l.set_nonblocking(true)?;
    let l = TcpListener::from_std(l)?;
    let addr = l.local_addr()?;
    let body = vec![b'x'; size];
    tokio::spawn(async move {
        while let Ok((mut c, _)) = l.accept().await {
            let body = body.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let mut seen = Vec::new();
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match c.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {size}\r\nConnection: close\r\n\r\n"
                );
                let _ = c.write_all(head.as_bytes()).await;
                let _ = c.write_all(&body).await;
            });
        }
    });
    Ok(addr)
}

/// Milliseconds to send `request` to `to` and read the whole answer.
async fn download(
    to: SocketAddr,
    tunnel_to: Option<SocketAddr>,
    request: &str,
    size: usize,
) -> Result<f64> {
    let t = Instant::now();
    let mut c = TcpStream::connect(to).await?;
    if let Some(target) = tunnel_to {
        c.write_all(format!("CONNECT {target} HTTP/1.1\r\n\r\n").as_bytes())
            .await?;
        let mut head = [0u8; 39];
        c.read_exact(&mut head).await?;
        if !head.starts_with(b"HTTP/1.1 200") {
            bail!("CONNECT refused: {}", String::from_utf8_lossy(&head));
        }
    }
    c.write_all(request.as_bytes()).await?;
    let mut out = Vec::with_capacity(size + 256);
    c.read_to_end(&mut out).await?;
    if out.len() < size {
        bail!("a short answer: {} bytes", out.len());
    }
    Ok(t.elapsed().as_secs_f64() * 1000.0)
}

/// The five timings of one server: the Rust client direct, through the
/// proxy as plain HTTP and through a tunnel; urllib direct and proxied.
struct Timings {
    direct: Vec<f64>,
    http: Vec<f64>,
    tunnel: Vec<f64>,
    py_direct: Vec<f64>,
    py_proxied: Vec<f64>,
}

async fn time_server(up: SocketAddr, via: SocketAddr, runs: usize, size: usize) -> Result<Timings> {
    let direct_req = format!("GET /1m HTTP/1.1\r\nHost: {up}\r\nConnection: close\r\n\r\n");
    let proxied_req =
        format!("GET http://{up}/1m HTTP/1.1\r\nHost: {up}\r\nConnection: close\r\n\r\n");
    let (mut direct, mut http, mut tunnel) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..3 {
        download(up, None, &direct_req, size).await?;
        download(via, None, &proxied_req, size).await?;
    }
    for _ in 0..runs {
        direct.push(download(up, None, &direct_req, size).await?);
        http.push(download(via, None, &proxied_req, size).await?);
        tunnel.push(download(via, Some(up), &direct_req, size).await?);
    }
    let (py_direct, py_proxied) = urllib(up, via, runs, size).await?;
    Ok(Timings {
        direct,
        http,
        tunnel,
        py_direct,
        py_proxied,
    })
}

async fn measure(runs: usize, size: usize, prims: PathBuf) -> Result<()> {
    let up = server(std::net::TcpListener::bind("127.0.0.1:0")?, size)?;
    // The same server behind a real route: a veth pair to a network
    // namespace, each end sending at most 1 Gbit/s, as a fast LAN would.
    let host = NetnsHost::new();
    host.limit_rate("1gbit");
    let lan = server(host.listen(8080), size)?;
    let proxy = EgressProxy::new(prims, vec![], prims_tests::egress_account());
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    let via = l.local_addr()?;
    let jail = proxy
        .attach(l.into())
        .await
        .context("attaching a listener")?;
    let entries = [up, lan]
        .iter()
        .map(|a| parse_allow_entry(&a.to_string()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(anyhow::Error::msg)?;
    let rules = Rules {
        list: AllowList::new(&entries, &[]),
        ..Rules::default()
    };
    let budget = Budget {
        max_bytes: u64::MAX,
        max_connections: u64::MAX,
    };
    let run = jail.begin(&rules, budget).await?;
    let local = time_server(up, via, runs, size).await?;
    let linked = time_server(lan, via, runs, size).await?;
    let report = jail.end(run).await;
    let moved: u64 = report.allowed.iter().map(|a| a.bytes).sum();
    println!("a {size}-byte HTTP download, {runs} of each, interleaved:");
    println!("| server | client | path | p50 ms | p90 ms | min ms | p50 overhead |");
    println!("|---|---|---|---|---|---|---|");
    for (server, t) in [("on loopback", local), ("across a 1 Gbit/s link", linked)] {
        table(
            server,
            "python urllib",
            t.py_direct,
            &[("through the proxy", t.py_proxied)],
        );
        table(
            server,
            "Rust, bare",
            t.direct,
            &[
                ("through the proxy, plain HTTP", t.http),
                ("through the proxy, CONNECT tunnel", t.tunnel),
            ],
        );
    }
    println!("the proxy counted {} MiB moved for the run", moved >> 20);
    Ok(())
}

fn table(server: &str, client: &str, direct: Vec<f64>, paths: &[(&str, Vec<f64>)]) {
    let d = stats(direct);
    println!(
        "| {server} | {client} | direct | {:.2} | {:.2} | {:.2} | — |",
        d.median, d.p90, d.min
    );
    for (name, xs) in paths {
        let s = stats(xs.clone());
        println!(
            "| {server} | {client} | {name} | {:.2} | {:.2} | {:.2} | {:+.0}% |",
            s.median,
            s.p90,
            s.min,
            (s.median / d.median - 1.0) * 100.0
        );
    }
}

const URLLIB: &str = r#"
import json, sys, time, urllib.request
up, via, runs, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
proxied = urllib.request.build_opener(urllib.request.ProxyHandler({"http": "http://" + via}))
def get(opener):
    t = time.perf_counter()
    with opener.open("http://%s/1m" % up, timeout=20) as r:
        n = len(r.read())
    if n != size:
        sys.exit("a short answer: %d bytes" % n)
    return (time.perf_counter() - t) * 1000
for _ in range(3):
    get(direct), get(proxied)
d, p = [], []
for _ in range(runs):
    d.append(get(direct))
    p.append(get(proxied))
print(json.dumps([d, p]))
"#;

/// Milliseconds per download by python's urllib: (direct, proxied).
async fn urllib(
    up: SocketAddr,
    via: SocketAddr,
    runs: usize,
    size: usize,
) -> Result<(Vec<f64>, Vec<f64>)> {
    let out = tokio::process::Command::new("/usr/bin/python3")
        .args([
            "-c",
            URLLIB,
            &up.to_string(),
            &via.to_string(),
            &runs.to_string(),
            &size.to_string(),
        ])
        .output()
        .await
        .context("running /usr/bin/python3")?;
    if !out.status.success() {
        bail!(
            "the urllib client failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    serde_json::from_slice(&out.stdout).context("the urllib client's timings")
}
