//! `prims-bench starts`: what a new interpreter costs a new session's first
//! call, with no warm pool to hide it: forked from the default
//! environment's template (the default path), and cold (the fallback).
//! Each sample opens a session on the supervisor socket, runs `print(1)`
//! and closes it, on a settled server.
//!
//! With `--against OTHER_PRIMS` the same is measured for a second build,
//! whose server runs beside the first (its own state directory, uid range
//! and cgroup), and the samples alternate between the two, so that both
//! columns share the machine's noise: how a change moves these paths is
//! the median of the paired differences, each pair taken a moment apart.
//! Each server has no default packages and the tests' IPython layer
//! (`--ipython-site`), so that it is up in seconds and the interpreter is
//! all that is measured.

use crate::live::supervisor::socket_path;
use crate::mcp::{bench_dir, Served};
use crate::stats::stats;
use anyhow::{bail, Context, Result};
use prims_protocol::client::Client;
use prims_protocol::jail::Status;
use prims_protocol::wire::RunRequest;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How a server starts its interpreters.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Start {
    Forked,
    Cold,
}

impl Start {
    fn name(self) -> &'static str {
        match self {
            Start::Forked => "forked",
            Start::Cold => "cold",
        }
    }
}

pub fn main(
    samples: usize,
    rounds: usize,
    prims: PathBuf,
    against: Option<PathBuf>,
    ipython_site: PathBuf,
) -> Result<()> {
    if samples < 5 || rounds < 1 {
        bail!("--samples must be at least 5 and --rounds at least 1");
    }
    if !ipython_site.join("IPython").is_dir() {
        bail!(
            "{} has no IPython: run scripts/ipython-site.sh first, or name another with --ipython-site",
            ipython_site.display()
        );
    }
    let builds: Vec<PathBuf> = std::iter::once(prims).chain(against).collect();
    println!("| path | build | samples | min ms | p50 ms | p90 ms |\n|---|---|---|---|---|---|");
    for start in [Start::Forked, Start::Cold] {
        // [build]: every sample of every round.
        let mut ms = vec![Vec::new(); builds.len()];
        for round in 0..rounds {
            eprintln!("{} round {}/{rounds}...", start.name(), round + 1);
            let got = side_by_side(&builds, start, samples, &ipython_site)?;
            for (all, some) in ms.iter_mut().zip(got) {
                all.extend(some);
            }
        }
        for (b, prims) in builds.iter().enumerate() {
            let s = stats(ms[b].clone());
            println!(
                "| {} | {} | {} | {:.2} | {:.2} | {:.2} |",
                start.name(),
                prims.display(),
                ms[b].len(),
                s.min,
                s.median,
                s.p90
            );
        }
        if let [first, second] = &ms[..] {
            let diffs: Vec<f64> = first.iter().zip(second).map(|(a, b)| a - b).collect();
            let mean = diffs.iter().sum::<f64>() / diffs.len() as f64;
            println!(
                "| {} | first − second, paired | {} | | {:+.3} | (mean {:+.3}) |",
                start.name(),
                diffs.len(),
                stats(diffs).median,
                mean
            );
        }
    }
    Ok(())
}

/// A server per build starting interpreters by `start`, side by side:
/// `samples` first calls of new sessions on each, taken in turns (the
/// order of each turn alternating), after a few that warm them up.
fn side_by_side(
    builds: &[PathBuf],
    start: Start,
    samples: usize,
    site: &Path,
) -> Result<Vec<Vec<f64>>> {
    let mut servers = Vec::new();
    let mut sockets = Vec::new();
    for (b, prims) in builds.iter().enumerate() {
        let dir = bench_dir(&format!("starts-{}-{b}", start.name()))?;
        let policy = dir.join("policy.toml");
        std::fs::write(
            &policy,
            format!(
                "[python]\ndefault_packages = []\nipython_site = {:?}\n\
                 [interpreters]\npool_size = 0\nfork_templates = {}\n\
                 [identity]\nuid_base = {}\nuid_count = 10000\n\
                 [cgroup]\nparent = \"prims-bench-starts-{b}\"\n",
                site.display().to_string(),
                start == Start::Forked,
                3_500_000 + 20_000 * b,
            ),
        )?;
        servers.push(Served::start(prims, &dir, Some(&policy))?);
        sockets.push(socket_path(&dir));
    }
    let rt = tokio::runtime::Runtime::new()?;
    let result = rt.block_on(measure(&sockets, start, samples));
    drop(servers);
    result
}

async fn measure(sockets: &[PathBuf], start: Start, samples: usize) -> Result<Vec<Vec<f64>>> {
    let mut clients = Vec::new();
    for socket in sockets {
        let client = connect(socket, "prims-bench starts").await?;
        wait_ready(&client, start).await?;
        for _ in 0..3 {
            first_call(&client).await?;
        }
        clients.push(client);
    }
    let mut ms = vec![Vec::with_capacity(samples); clients.len()];
    for i in 0..samples {
        let mut order: Vec<usize> = (0..clients.len()).collect();
        if i % 2 == 1 {
            order.reverse();
        }
        for b in order {
            ms[b].push(first_call(&clients[b]).await?);
        }
    }
    for c in &clients {
        let s = c.stats().await?;
        let (forked, cold) = (s.starts_forked, s.starts_cold);
        let want = match start {
            Start::Forked => cold == 0,
            Start::Cold => forked == 0,
        };
        if !want {
            bail!(
                "a {} server started {forked} forked and {cold} cold",
                start.name()
            );
        }
    }
    Ok(ms)
}
/// A client of the supervisor at `socket`, retried while it starts.
pub(crate) async fn connect(socket: &Path, who: &str) -> Result<Client> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match Client::connect(socket, who).await {
            Ok(c) => return Ok(c),
            Err(e) if Instant::now() > deadline => {
                return Err(e).with_context(|| format!("connecting to {}", socket.display()))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Until the server says it is ready (with templates, its default
/// template is up then).
async fn wait_ready(client: &Client, path: Start) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let s = client.stats().await?;
        if s.ready && (path == Start::Cold || s.templates_up > 0) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the server was not ready within 300 s: {s:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A new session's `print(1)`, in ms, then the session closed and its
/// interpreter gone.
async fn first_call(client: &Client) -> Result<f64> {
    let id = client.open_session(None).await?.session_id;
    let req = RunRequest {
        session_id: id.clone(),
        tenant: None,
        code: "print(1)".into(),
        requirements: vec![],
        limits: Default::default(),
        fresh: false,
        network: None,
    };
    let t = Instant::now();
    let reply = client.run(req, |_| {}).await?;
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    if reply.outcome.status != Status::Ok || reply.stdout != b"1\n" {
        bail!("print(1) answered unexpectedly: {reply:?}");
    }
    client.close_session(&id, None).await?;
    // Its interpreter stops after the answer: let it go before the next.
    let deadline = Instant::now() + Duration::from_secs(30);
    while client.stats().await?.interpreters_live > 0 {
        if Instant::now() > deadline {
            bail!("a closed session's interpreter did not stop within 30 s");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(ms)
}
