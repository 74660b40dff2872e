//! `prims-bench live --compare-ipython`: the live cases against two
//! `prims serve` running at once, one without the IPython layer (the agent
//! runs cells as plain Python) and one with the default layer, which the
//! daemon builds from the package index (cells run through IPython). The
//! cases alternate between the two servers, each step from settled pools
//! on both, so both columns share the machine's noise.

use super::cases::{self, FirstCalls, Pair};
use super::cell::Cell;
use super::report::Results;
use super::supervisor::{socket_path, Supervisor};
use super::{idle, ipython_report};
use crate::mcp::{bench_dir, free_port, start, Serve};
use anyhow::Result;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Pool size of both servers: case d's sessions all start warm.
const POOL: u64 = 8;

/// Samples of a and c taken on one server before switching to the other.
const CHUNK: usize = 5;

/// The two servers: a name, and what their policy adds to the common part.
const KINDS: [(&str, &str); 2] = [
    ("plain", "[python]\nipython_packages = []\n"),
    ("ipython", ""),
];

/// The first cell on each server, which shows that cells run (or do not
/// run) through IPython: the shell is imported before the first cell.
const KERNEL_CHECK: [Cell; 2] = [
    Cell {
        code: "import sys; print('IPython' in sys.modules)",
        stdout: "False\n",
    },
    Cell {
        code: "import sys; print('IPython' in sys.modules)",
        stdout: "True\n",
    },
];

/// Server `i`'s policy: its own cgroup parent and uid range (two servers
/// share the host), and a small workspace quota (each pooled session
/// reserves its quota of disk, and there are two pools).
fn policy(i: usize, extra: &str) -> String {
    format!(
        "[interpreters]\npool_size = {POOL}\n\
         [sessions]\ndisk_quota = \"256MiB\"\n\
         [cgroup]\nparent = \"prims-bench-ipython{i}\"\n\
         [identity]\nuid_base = {}\nuid_count = 1000\n{extra}",
        5_000_000 + i * 100_000
    )
}

/// One running server of the comparison.
struct Server {
    url: String,
    sup: Supervisor,
}

pub(crate) fn main(runs: usize, rounds: usize, prims: &Path) -> Result<()> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    let result = start_and_measure(runs, rounds, prims, &mut dirs);
    for dir in &dirs {
        prims_tests::teardown::unmount_below(dir);
        let _ = std::fs::remove_dir_all(dir);
    }
    let (results, startup) = result?;
    ipython_report::print(&results, startup);
    Ok(())
}

/// Starts both servers, measures, and stops them (before the caller
/// removes their directories).
fn start_and_measure(
    runs: usize,
    rounds: usize,
    prims: &Path,
    dirs: &mut Vec<PathBuf>,
) -> Result<([Results; 2], [Duration; 2])> {
    let mut serves: Vec<(Serve, u16)> = Vec::new();
    let started = Instant::now();
    for (i, (name, extra)) in KINDS.iter().enumerate() {
        let dir = bench_dir(&format!("live-{name}"))?;
        dirs.push(dir.clone());
        let p = dir.join("policy.toml");
        std::fs::write(&p, policy(i, extra))?;
        let port = free_port()?;
        serves.push((start(prims, &dir, port, Some(&p))?, port));
    }
    let rt = tokio::runtime::Runtime::new()?;
    let out = rt.block_on(async {
        let mut servers = Vec::new();
        for (dir, (_, port)) in dirs.iter().zip(&serves) {
            servers.push(Server {
                url: format!("http://127.0.0.1:{port}/mcp"),
                sup: Supervisor::connect(&socket_path(dir), POOL).await?,
            });
        }
        measure(&servers, started, runs, rounds).await
    });
    drop(serves);
    out
}

/// Waits until both servers have full pools, `live` interpreters in
/// sessions and nothing running.
async fn settle(servers: &[Server], live: u64) -> Result<()> {
    for s in servers {
        s.sup.settle(live).await?;
    }
    Ok(())
}

/// The servers' order in step `step`: the first one alternates.
fn order(step: usize) -> [usize; 2] {
    if step.is_multiple_of(2) {
        [0, 1]
    } else {
        [1, 0]
    }
}

async fn measure(
    servers: &[Server],
    started: Instant,
    runs: usize,
    rounds: usize,
) -> Result<([Results; 2], [Duration; 2])> {
    eprintln!("waiting for the base environment, the IPython layer and full pools of {POOL}...");
    let mut startup = [Duration::ZERO; 2];
    for (i, s) in servers.iter().enumerate() {
        s.sup.settle(0).await?;
        startup[i] = started.elapsed();
    }
    let mut r: [Results; 2] = Default::default();
    for x in &mut r {
        x.runs = runs;
        x.rounds = rounds;
    }

    eprintln!("cases a, c and e...");
    let mut open = Vec::new();
    for (i, s) in servers.iter().enumerate() {
        // The servers before this one hold their three sessions.
        for (j, other) in servers.iter().enumerate() {
            other.sup.settle(if j < i { 3 } else { 0 }).await?;
        }
        let o = idle::open(&s.url, &s.sup, KERNEL_CHECK[i]).await?;
        r[i].memory = o.memory;
        open.push(o);
    }
    let mut done = 0;
    let mut step = 0;
    while done < runs {
        let n = CHUNK.min(runs - done);
        for i in order(step) {
            settle(servers, 3).await?;
            let o = &open[i];
            let (a, c) = cases::same_session(&o.kept, &o.fresh, &o.socket, n).await?;
            r[i].a.extend(a);
            r[i].c.extend(c);
        }
        done += n;
        step += 1;
    }
    for o in open {
        o.close().await?;
    }

    eprintln!("case b ({runs} samples of each kind on each server)...");
    for step in 0..runs {
        for i in order(step) {
            settle(servers, 0).await?;
            let s = &servers[i];
            let first: FirstCalls = cases::first_calls(&s.url, &s.sup, 1).await?;
            r[i].first.extend(first);
        }
    }

    eprintln!("case d ({rounds} rounds of each kind on each server)...");
    for step in 0..rounds {
        for i in order(step) {
            settle(servers, 0).await?;
            let s = &servers[i];
            let d: Pair = cases::concurrent(&s.url, &s.sup, 1).await?;
            r[i].d.extend(d);
        }
    }
    Ok((r, startup))
}
