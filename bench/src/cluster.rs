//! `prims-bench cluster`: three nodes behind HAProxy
//! (scripts/cluster-local.sh) against one node reached directly, in the same
//! run: `run_code print(1)` latency through the router and straight to node
//! 0, interleaved, and the throughput of 8 concurrent sessions on one node
//! against 8 spread by the router over three.

use crate::mcp::{connect, free_port, run_code, sessions, throughput};
use crate::stats::{stats, Stats};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

const NODES: usize = 3;
const CONCURRENT: usize = 8;
const ROUNDS: usize = 5;

struct Cluster {
    script: PathBuf,
    envs: Vec<(String, String)>,
}

impl Cluster {
    fn run(&self, args: &[&str]) -> Result<String> {
        let out = Command::new(&self.script)
            .args(args)
            .envs(self.envs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .output()
            .with_context(|| format!("running {}", self.script.display()))?;
        if !out.status.success() {
            bail!(
                "cluster-local.sh {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.run(&["down"]);
    }
}

pub fn main(runs: usize, prims: PathBuf, script: Option<PathBuf>) -> Result<()> {
    if runs < 8 {
        bail!("--runs must be at least 8");
    }
    let script = script.unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/cluster-local.sh")
    });
    // The router's port, the nodes' after it, and the stats page at +1000.
    let base = loop {
        let p = free_port()?;
        if p < 60000
            && (1..=NODES as u16).all(|i| std::net::TcpListener::bind(("127.0.0.1", p + i)).is_ok())
        {
            break p;
        }
    };
    let cluster = Cluster {
        script,
        envs: vec![
            ("PRIMS_BIN".into(), prims.display().to_string()),
            ("PRIMS_CLUSTER_PORT".into(), base.to_string()),
            (
                "PRIMS_CLUSTER_DIR".into(),
                format!("/var/tmp/prims-bench-cluster-{}", std::process::id()),
            ),
        ],
    };
    eprintln!("starting {NODES} nodes and the router...");
    let out = cluster.run(&["up", &NODES.to_string()])?;
    let router = out.lines().last().unwrap_or_default().to_owned();
    tokio::runtime::Runtime::new()?.block_on(measure(&router, base, runs))
}

fn node_url(base: u16, node: usize) -> String {
    format!("http://127.0.0.1:{}/mcp", usize::from(base) + 1 + node)
}

async fn measure(router: &str, base: u16, runs: usize) -> Result<()> {
    let direct = &node_url(base, 0);
    let via_router = connect(router).await?;
    let straight = connect(direct).await?;
    eprintln!("warming up (the first runs wait for the base environments)...");
    let (_, rsid) = run_code(&via_router, None).await?;
    let (_, dsid) = run_code(&straight, None).await?;
    let (mut r, mut d) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        r.push(run_code(&via_router, Some(&rsid)).await?.0);
        d.push(run_code(&straight, Some(&dsid)).await?.0);
    }
    let (r, d): (Stats, Stats) = (stats(r), stats(d));

    // Alternate rounds, so a noisy moment costs both sides alike.
    let (mut one, mut three, mut per_node) = (Vec::new(), Vec::new(), [0usize; NODES]);
    let mut unrouted = Vec::new();
    for _ in 0..ROUNDS {
        one.push(throughput(sessions(direct, CONCURRENT).await?, runs).await?);
        // The same 8 sessions spread over the nodes by the client itself.
        let mut spread_here = Vec::new();
        for i in 0..CONCURRENT {
            spread_here.extend(sessions(&node_url(base, i % NODES), 1).await?);
        }
        unrouted.push(throughput(spread_here, runs).await?);
        let spread = sessions(router, CONCURRENT).await?;
        for (_, sid) in &spread {
            let node = sid.get(..4).and_then(|h| usize::from_str_radix(h, 16).ok());
            if let Some(n) = node.and_then(|n| per_node.get_mut(n)) {
                *n += 1;
            }
        }
        three.push(throughput(spread, runs).await?);
    }
    let (one, three, unrouted) = (
        stats(one).median,
        stats(three).median,
        stats(unrouted).median,
    );
    let _ = via_router.cancel().await;
    let _ = straight.cancel().await;

    println!("runs: {runs} of each, interleaved; rmcp client, legacy sessions");
    println!("| what | min ms | p50 ms | p90 ms |");
    println!("|---|---|---|---|");
    println!(
        "| through the router (3 nodes) | {:.1} | {:.1} | {:.1} |",
        r.min, r.median, r.p90
    );
    println!(
        "| straight to node 0 | {:.1} | {:.1} | {:.1} |",
        d.min, d.median, d.p90
    );
    println!("router overhead, p50: {:+.1} ms", r.median - d.median);
    println!();
    println!(
        "| {CONCURRENT} concurrent sessions, median of {ROUNDS} alternating rounds | runs/s |"
    );
    println!("|---|---|");
    println!("| all on node 0 | {one:.1} |");
    println!("| spread by the router ({per_node:?} sessions per node, all rounds) | {three:.1} |");
    println!("| spread by the client, straight to the nodes (3, 3, 2) | {unrouted:.1} |");
    println!(
        "3 nodes / 1 node: {:.2}x through the router, {:.2}x without it",
        three / one,
        unrouted / one
    );
    Ok(())
}
