//! `prims-bench starts`: what a new interpreter costs a new session's first
//! call, with no warm pool to hide it: forked from the default
//! environment's template (the default path), and cold (the fallback).
//! Each sample opens a session on the supervisor socket, runs `print(1)`
//! and closes it, on a settled server.
//!
//! With `--against OTHER_PRIMS` the same is measured for a second build,
//! and rounds alternate between the two builds, so that both columns share
//! the machine's noise: how a change to the jail moves these paths is the
//! difference of medians in one run, never two runs apart. Each server has
//! no default packages and the tests' IPython layer (`--ipython-site`), so
//! that it is up in seconds and the interpreter is all that is measured.

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
    // [build][path]: every sample of every round.
    let mut ms = vec![[Vec::new(), Vec::new()]; builds.len()];
    for round in 0..rounds {
        for (b, prims) in builds.iter().enumerate() {
            for (p, path) in [Start::Forked, Start::Cold].into_iter().enumerate() {
                eprintln!(
                    "round {}/{rounds}: {} {}...",
                    round + 1,
                    prims.display(),
                    path.name()
                );
                ms[b][p].extend(one_server(prims, path, samples, &ipython_site)?);
            }
        }
    }
    println!("\n| build | path | samples | min ms | p50 ms | p90 ms |\n|---|---|---|---|---|---|");
    for (b, prims) in builds.iter().enumerate() {
        for (p, path) in [Start::Forked, Start::Cold].into_iter().enumerate() {
            let s = stats(ms[b][p].clone());
            println!(
                "| {} | {} | {} | {:.2} | {:.2} | {:.2} |",
                prims.display(),
                path.name(),
                ms[b][p].len(),
                s.min,
                s.median,
                s.p90
            );
        }
    }
    if builds.len() == 2 {
        for (p, path) in [Start::Forked, Start::Cold].into_iter().enumerate() {
            let (first, second) = (stats(ms[0][p].clone()), stats(ms[1][p].clone()));
            println!(
                "\n{}: p50 {:+.2} ms ({:.3}×) for the first build against the second",
                path.name(),
                first.median - second.median,
                first.median / second.median
            );
        }
    }
    Ok(())
}

/// A server of `prims` starting interpreters by `path`: `samples` first
/// calls of new sessions, after a few that warm it up.
fn one_server(prims: &Path, path: Start, samples: usize, site: &Path) -> Result<Vec<f64>> {
    let dir = bench_dir(&format!("starts-{}", path.name()))?;
    let policy = dir.join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[python]\ndefault_packages = []\nipython_site = {:?}\n\
             [interpreters]\npool_size = 0\nfork_templates = {}\n",
            site.display().to_string(),
            path == Start::Forked
        ),
    )?;
    let served = Served::start(prims, &dir, Some(&policy))?;
    let rt = tokio::runtime::Runtime::new()?;
    let result = rt.block_on(measure(&socket_path(&dir), path, samples));
    drop(served);
    result
}

async fn measure(socket: &Path, path: Start, samples: usize) -> Result<Vec<f64>> {
    let client = connect(socket).await?;
    wait_ready(&client, path).await?;
    for _ in 0..3 {
        first_call(&client).await?;
    }
    let mut ms = Vec::with_capacity(samples);
    for _ in 0..samples {
        ms.push(first_call(&client).await?);
    }
    let s = client.stats().await?;
    let (forked, cold) = (s.starts_forked, s.starts_cold);
    let want = match path {
        Start::Forked => cold == 0,
        Start::Cold => forked == 0,
    };
    if !want {
        bail!(
            "the {} server started {forked} forked and {cold} cold",
            path.name()
        );
    }
    Ok(ms)
}

async fn connect(socket: &Path) -> Result<Client> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match Client::connect(socket, "prims-bench starts").await {
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
