//! `prims-bench live`: live interpreters through MCP over HTTP with rmcp's
//! client, against one fresh `prims serve` with a warm pool. Cases a–d
//! each run beside the same calls made with `fresh: true` (a new jail and
//! python per call, as before live interpreters) in the same run, so the
//! ratios are measured together; a and c also through the supervisor
//! socket, which shows the front-end's share. Case e reads idle memory
//! from the supervisor's stats.

mod cases;
mod cell;
mod report;
mod socket;
mod supervisor;

use crate::mcp::{bench_dir, with_serve};
use anyhow::{bail, Context, Result};
use cases::{Session, SESSIONS};
use cell::{Expect, PANDAS, PRINT_1};
use prims_policy::Policy;
use report::{Memory, Results};
use socket::SocketSession;
use std::path::{Path, PathBuf};
use supervisor::Supervisor;

/// The policy written when `--policy` is not given: the defaults with a
/// pool large enough for case d's sessions to all start warm.
const POLICY: &str = "[interpreters]\npool_size = 8\n";

pub fn main(runs: usize, rounds: usize, prims: PathBuf, policy: Option<PathBuf>) -> Result<()> {
    if runs < 20 {
        bail!("--runs must be at least 20");
    }
    if rounds < 1 {
        bail!("--rounds must be at least 1");
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
    with_serve(&prims, &dir, Some(&policy), |port| {
        measure(&dir, port, runs, rounds, u64::from(pool_size))
    })
}

async fn measure(dir: &Path, port: u16, runs: usize, rounds: usize, pool: u64) -> Result<()> {
    let url = format!("http://127.0.0.1:{port}/mcp");
    let sup = Supervisor::connect(&dir.join("state/supervisor.sock"), pool).await?;
    eprintln!("waiting for the base environment and a full pool of {pool}...");
    sup.settle(0).await?;

    eprintln!("cases a, c and e...");
    // On cgroup v1 the page cache of pandas' files stays charged to the
    // cgroup that read them first: the pool's first interpreter. A session
    // that claims it is left out of case e, which measures one like the
    // rest, whose files were already cached.
    Session::open(&url, PRINT_1).await?.close().await;
    sup.settle(0).await?;
    let kept = Session::open(&url, PRINT_1).await?;
    kept.run(PANDAS, false, Expect::Kept).await?;
    let idle = sup.settle(1).await?;
    let memory = Memory {
        pool_ready: idle.pool_ready,
        pool_bytes: idle.pool_memory_bytes,
        session_bytes: idle.interpreters_memory_bytes,
    };
    let fresh = Session::open(&url, PRINT_1).await?;
    let socket = SocketSession::open(&sup, PRINT_1).await?;
    socket.run(PANDAS, Expect::Kept).await?;
    sup.settle(3).await?;
    let (a, c) = cases::same_session(&kept, &fresh, &socket, runs).await?;
    kept.close().await;
    fresh.close().await;
    socket.close().await?;

    eprintln!("case b ({runs} samples of each kind, each from a full pool)...");
    let (b, handshakes) = cases::first_calls(&url, &sup, runs).await?;
    eprintln!("case d ({rounds} rounds of each kind)...");
    let d = cases::concurrent(&url, &sup, rounds).await?;
    report::print(&Results {
        runs,
        rounds,
        a,
        b,
        c,
        d,
        handshakes,
        memory,
    });
    Ok(())
}
