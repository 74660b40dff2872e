//! `prims-bench autosave`: what the background save of a session's globals
//! costs (`interpreters.autosave_after`): the CPU its jail spends per save,
//! and its effect on the latency of the session's own calls.
//!
//! Two servers of the same build run side by side (their own state
//! directories, uid ranges and cgroups): one with the default policy's
//! autosave (10 s), one with it off (`autosave_after = "0s"`). Each has one
//! session that defines a state (`--state`: `small`, a few variables and a
//! cell-defined function and class; `large`, those and about 12 MB of
//! lists and bytes), then calls `print(1)` with a pause between calls, as
//! an agent does, for `--seconds`. The calls alternate between the two
//! servers, so that both columns share the machine's noise. Every call
//! changes nothing worth a save but still marks the session changed (the
//! supervisor cannot tell), so a save is due every `autosave_after`: the
//! worst case. The saves' CPU comes from the server's own counters
//! (`autosaves`, `autosave_cpu_ms`).

use crate::live::supervisor::socket_path;
use crate::mcp::{bench_dir, Served};
use crate::starts::connect;
use anyhow::{bail, Result};
use prims_protocol::client::Client;
use prims_protocol::jail::Status;
use prims_protocol::wire::RunRequest;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const SMALL: &str = "x = 41\ndef f(n):\n    return n + 1\nclass C:\n    v = 'cell class'\n\
                     rows = [{'id': i, 'name': str(i)} for i in range(1000)]\n";
const LARGE: &str = "numbers = list(range(1_000_000))\nblob = bytes(4 << 20)\n";

/// A call's pause before the next: an agent's calls come seconds apart;
/// this is shorter, for samples, and long enough for the saves to run
/// between calls as they do in use.
const PAUSE: Duration = Duration::from_millis(50);

pub fn main(
    seconds: u64,
    rounds: usize,
    state: String,
    prims: PathBuf,
    ipython_site: PathBuf,
) -> Result<()> {
    let define = match state.as_str() {
        "small" => SMALL.to_string(),
        "large" => format!("{SMALL}{LARGE}"),
        other => bail!("--state is small or large, not {other:?}"),
    };
    if seconds < 15 || rounds < 1 {
        bail!("--seconds must be at least 15 and --rounds at least 1");
    }
    if !ipython_site.join("IPython").is_dir() {
        bail!(
            "{} has no IPython: run scripts/ipython-site.sh first, or name another with --ipython-site",
            ipython_site.display()
        );
    }
    // [on, off]: every sample of every round.
    let mut ms = [Vec::new(), Vec::new()];
    let (mut saves, mut cpu_ms) = (0u64, 0u64);
    for round in 0..rounds {
        eprintln!("autosave round {}/{rounds}...", round + 1);
        let got = side_by_side(&prims, &define, seconds, &ipython_site)?;
        ms[0].extend(got.ms[0].iter());
        ms[1].extend(got.ms[1].iter());
        saves += got.saves;
        cpu_ms += got.cpu_ms;
    }
    println!(
        "state: {state}; print(1) every {} ms for {seconds} s, {rounds} rounds",
        PAUSE.as_millis()
    );
    println!("| autosave | calls | p50 ms | p90 ms | p99 ms | max ms |\n|---|---|---|---|---|---|");
    for (name, xs) in [("default (10s)", &ms[0]), ("off", &ms[1])] {
        let q = quantiles(xs);
        println!(
            "| {name} | {} | {:.2} | {:.2} | {:.2} | {:.2} |",
            xs.len(),
            q(0.5),
            q(0.9),
            q(0.99),
            q(1.0)
        );
    }
    if saves == 0 {
        bail!("the server with autosave on saved nothing");
    }
    println!(
        "saves: {saves}, CPU per save {:.1} ms (the session's jail, at idle priority)",
        cpu_ms as f64 / saves as f64
    );
    Ok(())
}

fn quantiles(xs: &[f64]) -> impl Fn(f64) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    move |q| v[((v.len() - 1) as f64 * q).round() as usize]
}

struct Round {
    ms: [Vec<f64>; 2],
    saves: u64,
    cpu_ms: u64,
}

fn side_by_side(prims: &Path, define: &str, seconds: u64, site: &Path) -> Result<Round> {
    let mut servers = Vec::new();
    let mut sockets = Vec::new();
    for (b, after) in ["10s", "0s"].iter().enumerate() {
        let dir = bench_dir(&format!("autosave-{b}"))?;
        let policy = dir.join("policy.toml");
        std::fs::write(
            &policy,
            format!(
                "[python]\ndefault_packages = []\nipython_site = {:?}\n\
                 [interpreters]\nautosave_after = {after:?}\n\
                 [identity]\nuid_base = {}\nuid_count = 10000\n\
                 [cgroup]\nparent = \"prims-bench-autosave-{b}\"\n",
                site.display().to_string(),
                3_600_000 + 20_000 * b,
            ),
        )?;
        servers.push(Served::start(prims, &dir, Some(&policy))?);
        sockets.push(socket_path(&dir));
    }
    let rt = tokio::runtime::Runtime::new()?;
    let result = rt.block_on(measure(&sockets, define, seconds));
    drop(servers);
    result
}

async fn measure(sockets: &[PathBuf], define: &str, seconds: u64) -> Result<Round> {
    let mut sessions = Vec::new();
    for socket in sockets {
        let client = connect(socket, "prims-bench autosave").await?;
        wait_ready(&client).await?;
        let id = client.open_session(None).await?.session_id;
        call(&client, &id, define).await?;
        sessions.push((client, id));
    }
    let mut ms = [Vec::new(), Vec::new()];
    let end = Instant::now() + Duration::from_secs(seconds);
    let mut i = 0usize;
    while Instant::now() < end {
        let order: [usize; 2] = if i.is_multiple_of(2) { [0, 1] } else { [1, 0] };
        for b in order {
            let (client, id) = &sessions[b];
            ms[b].push(call(client, id, "print(1)").await?);
            tokio::time::sleep(PAUSE).await;
        }
        i += 1;
    }
    let s = sessions[0].0.stats().await?;
    let off = sessions[1].0.stats().await?;
    if off.autosaves != 0 {
        bail!("the server with autosave off saved {} times", off.autosaves);
    }
    Ok(Round {
        ms,
        saves: s.autosaves,
        cpu_ms: s.autosave_cpu_ms,
    })
}

/// One call in the session, in ms; it must succeed.
async fn call(client: &Client, id: &str, code: &str) -> Result<f64> {
    let req = RunRequest {
        session_id: id.to_string(),
        tenant: None,
        code: code.into(),
        requirements: vec![],
        limits: Default::default(),
        fresh: false,
        network: None,
    };
    let t = Instant::now();
    let reply = client.run(req, |_| {}).await?;
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    if reply.outcome.status != Status::Ok {
        bail!("{code:?} answered unexpectedly: {reply:?}");
    }
    Ok(ms)
}

async fn wait_ready(client: &Client) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let s = client.stats().await?;
        if s.ready {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the server was not ready within 300 s: {s:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
