//! `prims-bench live`: live interpreters through MCP over HTTP with rmcp's
//! client, against one fresh `prims serve` with a warm pool. Cases a–d
//! each run beside the same calls made with `fresh: true` (a new jail and
//! python per call, as before live interpreters) in the same run, so the
//! ratios are measured together; a and c also through the supervisor
//! socket, which shows the front-end's share. Case e reads idle memory
//! from the supervisor's stats and the agent's `/proc`. With
//! `--compare-ipython` the cases run against two servers at once, without
//! and with the IPython layer, alternating between them (ipython.rs).

pub(crate) mod cases;
pub(crate) mod cell;
pub(crate) mod idle;
mod ipython;
mod ipython_report;
mod report;
mod socket;
pub(crate) mod supervisor;

use crate::mcp::{bench_dir, with_serve};
use anyhow::{bail, Context, Result};
use cases::SESSIONS;
use cell::PRINT_1;
use prims_policy::Policy;
use report::Results;
use std::path::PathBuf;
use supervisor::{socket_path, Supervisor};

/// The policy written when `--policy` is not given: the defaults with a
/// pool large enough for case d's sessions to all start warm.
const POLICY: &str = "[interpreters]\npool_size = 8\n";

pub fn main(
    runs: usize,
    rounds: usize,
    prims: PathBuf,
    policy: Option<PathBuf>,
    compare_ipython: bool,
) -> Result<()> {
    if runs < 20 {
        bail!("--runs must be at least 20");
    }
    if rounds < 1 {
        bail!("--rounds must be at least 1");
    }
    if compare_ipython {
        if policy.is_some() {
            bail!("--compare-ipython writes its own two policies; leave out --policy");
        }
        return ipython::main(runs, rounds, &prims);
    }
    let given = match &policy {
        Some(p) => Policy::load(p).with_context(|| format!("reading {}", p.display()))?,
        None => Policy::from_toml_str(POLICY)?,
    };
    let pool_size = given.interpreters.pool_size;
    if (pool_size as usize) < SESSIONS {
        bail!("the policy sets interpreters.pool_size = {pool_size}; case d needs at least {SESSIONS}");
    }
    let dir = bench_dir("live")?;
    let policy = match policy {
        Some(p) => p,
        None => {
            let p = dir.join("policy.toml");
            std::fs::write(&p, POLICY)?;
            p
        }
    };
    let socket = socket_path(&dir);
    with_serve(&prims, &dir, Some(&policy), |port| async move {
        let url = format!("http://127.0.0.1:{port}/mcp");
        let sup = Supervisor::connect(&socket, u64::from(pool_size)).await?;
        let r = measure(&url, &sup, runs, rounds).await?;
        report::print(&r);
        Ok(())
    })
}

async fn measure(url: &str, sup: &Supervisor, runs: usize, rounds: usize) -> Result<Results> {
    eprintln!(
        "waiting for the base environment and a full pool of {}...",
        sup.pool_size
    );
    sup.settle(0).await?;
    eprintln!("cases a, c and e...");
    let open = idle::open(url, sup, PRINT_1).await?;
    let (a, c) = cases::same_session(&open.kept, &open.fresh, &open.socket, runs).await?;
    let memory = open.memory;
    open.close().await?;
    eprintln!("case b ({runs} samples of each kind, each from a full pool)...");
    let first = cases::first_calls(url, sup, runs).await?;
    eprintln!("case d ({rounds} rounds of each kind)...");
    let d = cases::concurrent(url, sup, rounds).await?;
    Ok(Results {
        runs,
        rounds,
        a,
        c,
        d,
        first,
        memory,
    })
}
