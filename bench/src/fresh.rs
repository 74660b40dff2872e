//! `prims-bench fresh`: an evaluation harness's load. Independent programs
//! in the style of HumanEval's canonical solutions with their tests, each
//! in a new interpreter (`fresh: true`) through the supervisor socket, 4 at
//! a time, against the same programs as bare `python3 -I -c` subprocesses
//! 4 at a time. Rounds alternate between the two in one run, so the ratio
//! shares the machine's noise. Then a new session's first pandas call,
//! quiet and under that load ([`loaded`]). Run it with and without
//! `interpreters.fork_templates` to see what templates change.

mod loaded;
pub(crate) mod programs;

use crate::live::supervisor::socket_path;
use crate::mcp::{bench_dir, with_serve};
use anyhow::{bail, Context, Result};
use prims_protocol::client::Client;
use programs::{run_fresh, PARALLEL, PROGRAMS};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub fn main(
    rounds: usize,
    repeat: usize,
    prims: PathBuf,
    policy: Option<PathBuf>,
    python: PathBuf,
) -> Result<()> {
    if rounds < 1 || repeat < 1 {
        bail!("--rounds and --repeat must be at least 1");
    }
    let programs: Vec<&'static str> = (0..repeat).flat_map(|_| PROGRAMS).collect();
    let templates = match &policy {
        Some(p) => {
            prims_policy::Policy::load(p)
                .with_context(|| format!("reading {}", p.display()))?
                .interpreters
                .fork_templates
        }
        None => false,
    };
    let dir = bench_dir("fresh")?;
    let socket = socket_path(&dir);
    with_serve(&prims, &dir, policy.as_deref(), |_port| async move {
        let client = Client::connect(&socket, "prims-bench fresh").await?;
        let sessions = open_sessions(&client).await?;
        // The first batch starts what a new interpreter needs (a template,
        // when the policy wants them) and is not counted.
        prims_batch(&client, &sessions, &programs).await?;
        wait_for_templates(&client, templates).await?;
        let mut bare = Vec::new();
        let mut jailed = Vec::new();
        let mut cpu = (Vec::new(), Vec::new());
        let per_program = |ns: u64| ns as f64 / 1e6 / programs.len() as f64;
        for round in 0..rounds {
            let busy = cpu_busy_ns()?;
            let b = bare_batch(&python, &programs)?;
            let between = cpu_busy_ns()?;
            let p = prims_batch(&client, &sessions, &programs).await?;
            let after = cpu_busy_ns()?;
            cpu.0.push(per_program(between.saturating_sub(busy)));
            cpu.1.push(per_program(after.saturating_sub(between)));
            eprintln!("round {}: bare {b:.1}/s, PRIMS fresh {p:.1}/s", round + 1);
            bare.push(b);
            jailed.push(p);
        }
        let stats = client.stats().await?;
        let first = loaded::first_pandas(&client, &sessions).await?;
        report(
            &programs,
            (&bare, &jailed),
            (&cpu.0, &cpu.1),
            stats.starts_forked,
            stats.starts_cold,
        );
        loaded::report(&first);
        Ok(())
    })
}

async fn open_sessions(client: &Client) -> Result<Vec<String>> {
    let mut ids = Vec::new();
    for _ in 0..PARALLEL {
        ids.push(client.open_session(None).await?.session_id);
    }
    Ok(ids)
}

/// Waits until a template is up, when the policy wants them.
pub(crate) async fn wait_for_templates(client: &Client, templates: bool) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    while templates && client.stats().await?.templates_up == 0 {
        if Instant::now() > deadline {
            bail!("interpreters.fork_templates is on, but no template came up in 120 s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// Programs per second, each a bare `python -I -c`, `PARALLEL` at a time.
pub(crate) fn bare_batch(python: &Path, programs: &[&'static str]) -> Result<f64> {
    let next = AtomicUsize::new(0);
    let t = Instant::now();
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..PARALLEL)
            .map(|_| {
                scope.spawn(|| -> Result<()> {
                    while let Some(code) = programs.get(next.fetch_add(1, Ordering::Relaxed)) {
                        let out = std::process::Command::new(python)
                            .args(["-I", "-c", code])
                            .output()
                            .with_context(|| format!("running {}", python.display()))?;
                        if !out.status.success() || out.stdout != b"ok\n" {
                            bail!("bare python failed: {out:?}");
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        workers
            .into_iter()
            .try_for_each(|w| w.join().map_err(|_| anyhow::anyhow!("a worker panicked"))?)
    })?;
    Ok(programs.len() as f64 / t.elapsed().as_secs_f64())
}

/// Programs per second through the supervisor, each `fresh: true` in one
/// of the sessions, one session per program in flight.
async fn prims_batch(
    client: &Client,
    sessions: &[String],
    programs: &[&'static str],
) -> Result<f64> {
    let workers = sessions.iter().map(|id| (client.clone(), id.clone()));
    spread(
        workers.collect(),
        programs,
        |(client, id), code| async move { run_fresh(&client, &id, code).await },
    )
    .await
}

/// Programs per second, `programs` spread over `workers`, one in flight
/// per worker: `run(worker, program)` runs each.
pub(crate) async fn spread<W, F, Fut>(
    workers: Vec<W>,
    programs: &[&'static str],
    run: F,
) -> Result<f64>
where
    W: Clone + Send + 'static,
    F: Fn(W, &'static str) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Result<()>> + Send,
{
    let next = Arc::new(AtomicUsize::new(0));
    let programs: Arc<Vec<&'static str>> = Arc::new(programs.to_vec());
    let t = Instant::now();
    let tasks: Vec<_> = workers
        .into_iter()
        .map(|worker| {
            let (next, programs, run) = (next.clone(), programs.clone(), run.clone());
            tokio::spawn(async move {
                while let Some(code) = programs.get(next.fetch_add(1, Ordering::Relaxed)) {
                    run(worker.clone(), code).await?;
                }
                Ok::<(), anyhow::Error>(())
            })
        })
        .collect();
    for task in tasks {
        task.await??;
    }
    Ok(programs.len() as f64 / t.elapsed().as_secs_f64())
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The CPU time the whole machine spent busy so far (`/proc/stat`: user,
/// nice, system, irq and softirq), in ns: what a batch costs, whoever
/// spends it, and less at the mercy of the host's noise than a rate.
fn cpu_busy_ns() -> Result<u64> {
    let stat = std::fs::read_to_string("/proc/stat").context("reading /proc/stat")?;
    let line = stat
        .lines()
        .find(|l| l.starts_with("cpu "))
        .context("/proc/stat has no cpu line")?;
    let ticks: Vec<u64> = line
        .split_ascii_whitespace()
        .skip(1)
        .map(|v| v.parse().context("a /proc/stat field"))
        .collect::<Result<_>>()?;
    // user nice system idle iowait irq softirq
    let busy: u64 = [0, 1, 2, 5, 6].iter().filter_map(|i| ticks.get(*i)).sum();
    // SAFETY: sysconf with a valid name has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = u64::try_from(hz).ok().filter(|h| *h > 0).unwrap_or(100);
    Ok(busy * (1_000_000_000 / hz))
}

fn report(
    programs: &[&str],
    (bare, jailed): (&[f64], &[f64]),
    (bare_cpu, jailed_cpu): (&[f64], &[f64]),
    forked: u64,
    cold: u64,
) {
    let ratios: Vec<f64> = bare.iter().zip(jailed).map(|(b, p)| p / b).collect();
    let cpu_ratios: Vec<f64> = bare_cpu
        .iter()
        .zip(jailed_cpu)
        .map(|(b, p)| b / p)
        .collect();
    println!(
        "{} programs per batch ({} distinct), {PARALLEL} at a time, {} rounds; interpreters started forked {forked}, cold {cold}\n",
        programs.len(),
        PROGRAMS.len(),
        bare.len()
    );
    println!("| | median programs/s | min | max |");
    println!("|---|---|---|---|");
    let row = |name: &str, v: &[f64]| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(0.0, f64::max);
        println!("| {name} | {:.1} | {lo:.1} | {hi:.1} |", median(v));
    };
    row("bare `python3 -I -c`", bare);
    row("PRIMS, `fresh: true`, supervisor socket", jailed);
    println!(
        "\nPRIMS / bare, per round: median {:.2}× (target ≥ 1.00×)",
        median(&ratios)
    );
    println!(
        "\nCPU per program (the whole machine, /proc/stat), median: bare {:.1} ms, PRIMS {:.1} ms; bare / PRIMS per round: median {:.2}×",
        median(bare_cpu),
        median(jailed_cpu),
        median(&cpu_ratios)
    );
}
