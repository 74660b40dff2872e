//! `prims-bench cluster`: three nodes behind HAProxy
//! (scripts/cluster-local.sh) against one node reached directly, in the same
//! run: `run_code print(1)` latency through the router and straight to node
//! 0, interleaved, and the throughput of 8 concurrent sessions on one node
//! against 8 spread by the router over three; each with kept-alive
//! connections and with a new connection per call.

use crate::mcp::{connect, free_port, run_code, sessions, throughput, Conn};
use crate::stats::{stats, Stats};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

const NODES: usize = 3;
const CONCURRENT: usize = 8;
const ROUNDS: usize = 7;

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

const CONNS: [Conn; 2] = [Conn::KeepAlive, Conn::PerCall];

async fn latency(router: &str, direct: &str, runs: usize, conn: Conn) -> Result<(Stats, Stats)> {
    let via_router = connect(router, conn).await?;
    let straight = connect(direct, conn).await?;
    let (_, rsid) = run_code(&via_router, None).await?;
    let (_, dsid) = run_code(&straight, None).await?;
    let (mut r, mut d) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        r.push(run_code(&via_router, Some(&rsid)).await?.0);
        d.push(run_code(&straight, Some(&dsid)).await?.0);
    }
    let _ = via_router.cancel().await;
    let _ = straight.cancel().await;
    Ok((stats(r), stats(d)))
}

/// Runs/s of 8 sessions: all on node 0, spread by the client straight to
/// the nodes (3, 3, 2), spread by the router.
#[derive(Default)]
struct Rounds {
    one: Vec<f64>,
    unrouted: Vec<f64>,
    routed: Vec<f64>,
}

impl Rounds {
    async fn round(
        &mut self,
        router: &str,
        base: u16,
        runs: usize,
        conn: Conn,
        per_node: &mut [usize; NODES],
    ) -> Result<()> {
        let direct = node_url(base, 0);
        self.one
            .push(throughput(sessions(&direct, CONCURRENT, conn).await?, runs).await?);
        let mut spread_here = Vec::new();
        for i in 0..CONCURRENT {
            spread_here.extend(sessions(&node_url(base, i % NODES), 1, conn).await?);
        }
        self.unrouted.push(throughput(spread_here, runs).await?);
        let spread = sessions(router, CONCURRENT, conn).await?;
        for (_, sid) in &spread {
            let node = sid.get(..4).and_then(|h| usize::from_str_radix(h, 16).ok());
            if let Some(n) = node.and_then(|n| per_node.get_mut(n)) {
                *n += 1;
            }
        }
        self.routed.push(throughput(spread, runs).await?);
        Ok(())
    }

    /// Median runs/s of each side, then the median of each round's ratio to
    /// one node (a round's sides ran back to back, so drift cancels).
    fn medians(&self) -> ([f64; 3], [f64; 2]) {
        let ratio = |side: &[f64]| {
            let r = side.iter().zip(&self.one).map(|(x, one)| x / one).collect();
            stats(r).median
        };
        (
            [&self.one, &self.routed, &self.unrouted].map(|v| stats(v.clone()).median),
            [ratio(&self.routed), ratio(&self.unrouted)],
        )
    }
}

async fn measure(router: &str, base: u16, runs: usize) -> Result<()> {
    let direct = &node_url(base, 0);
    eprintln!("warming up (the first runs wait for the base environments)...");
    let mut lat = Vec::new();
    for conn in CONNS {
        lat.push(latency(router, direct, runs, conn).await?);
    }
    // Alternate rounds, so a noisy moment costs every side alike.
    let mut rounds = [Rounds::default(), Rounds::default()];
    let mut per_node = [0usize; NODES];
    for _ in 0..ROUNDS {
        for (r, conn) in rounds.iter_mut().zip(CONNS) {
            r.round(router, base, runs, conn, &mut per_node).await?;
        }
    }
    let [(kept, kept_x), (fresh, fresh_x)] = [rounds[0].medians(), rounds[1].medians()];

    println!("runs: {runs} of each, interleaved; rmcp client, legacy sessions");
    println!("| `run_code print(1)` | min ms | p50 ms | p90 ms |");
    println!("|---|---|---|---|");
    for (conn, (r, d)) in CONNS.iter().zip(&lat) {
        println!("| *{}* | | | |", conn.label());
        println!("{}", r.row("through the router (3 nodes)"));
        println!("{}", d.row("straight to node 0"));
    }
    println!(
        "router overhead, p50: {:+.1} ms kept alive, {:+.1} ms with a new connection per call",
        lat[0].0.median - lat[0].1.median,
        lat[1].0.median - lat[1].1.median
    );
    println!();
    println!(
        "| {CONCURRENT} concurrent sessions, median of {ROUNDS} alternating rounds, runs/s | kept alive | new connection per call |"
    );
    println!("|---|---|---|");
    let rows = [
        "all on node 0".to_string(),
        format!("spread by the router ({per_node:?} sessions per node, all rounds)"),
        "spread by the client, straight to the nodes (3, 3, 2)".to_string(),
    ];
    for (i, what) in rows.iter().enumerate() {
        println!("| {what} | {:.1} | {:.1} |", kept[i], fresh[i]);
    }
    println!("3 nodes / 1 node, median of the rounds' ratios:");
    println!(
        "  through the router: {:.2}x kept alive, {:.2}x with a new connection per call",
        kept_x[0], fresh_x[0]
    );
    println!(
        "  without the router: {:.2}x kept alive, {:.2}x with a new connection per call",
        kept_x[1], fresh_x[1]
    );
    Ok(())
}
