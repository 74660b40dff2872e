//! Phases 3, 5, 6 and 7: idle pandas sessions, calls in one session, and
//! new sessions' calls traced phase by phase.

use super::node::{ms, print_1, run, server_ms, Node};
use crate::idle::{mem_available, tree_pss};
use anyhow::Result;
use std::time::{Duration, Instant};

/// Phase 3's cell, and what it prints.
pub(super) const PANDAS: &str =
    "import pandas as pd; df = pd.DataFrame({'x': range(1000)}); print(df.x.sum())";
const PANDAS_OUT: &str = "499500\n";

#[derive(Debug)]
pub(super) struct Idle {
    pub sessions: usize,
    /// Host `MemAvailable` before and after, bytes.
    pub available: (u64, u64),
    /// PSS of the server's processes before and after, bytes, and how
    /// many processes.
    pub pss: ((u64, usize), (u64, usize)),
    /// Each session's first call (the pandas cell), ms.
    pub first_calls: Vec<f64>,
}

/// Phase 3: `n` new sessions each run the pandas cell and stay open; the
/// memory readings are taken with the pool full and settled.
pub(super) async fn idle_pandas(node: &Node, n: usize) -> Result<Idle> {
    node.settle(0).await?;
    let before = mem_available().await?;
    let pss_before = tree_pss(&node.state)?;
    let mut open = Vec::with_capacity(n);
    let mut first_calls = Vec::with_capacity(n);
    for _ in 0..n {
        let c = node.connect().await?;
        first_calls.push(run(&c, PANDAS, false, PANDAS_OUT).await?.0);
        open.push(c);
    }
    node.settle(n as u64).await?;
    let after = mem_available().await?;
    let pss_after = tree_pss(&node.state)?;
    for c in open {
        let _ = c.cancel().await;
    }
    Ok(Idle {
        sessions: n,
        available: (before, after),
        pss: (pss_before, pss_after),
        first_calls,
    })
}

/// Phase 5: `runs` `print(1)` calls in one session, after its first.
pub(super) async fn same_session(node: &Node, runs: usize) -> Result<Vec<f64>> {
    node.settle(0).await?;
    let c = node.connect().await?;
    print_1(&c).await?;
    let mut out = Vec::with_capacity(runs);
    for _ in 0..runs {
        out.push(print_1(&c).await?.0);
    }
    let _ = c.cancel().await;
    Ok(out)
}

/// One new session, phase by phase, in ms.
#[derive(Debug, Clone, Copy)]
pub(super) struct Trace {
    pub init: f64,
    pub first: f64,
    pub second: f64,
    pub close: f64,
    /// The server's own `duration_ms` of the first and second calls.
    pub first_server: Option<f64>,
    pub second_server: Option<f64>,
}

/// Phases 6 and 7: `n` new sessions of each node, alternating, each from
/// a settled server.
pub(super) async fn traces(nodes: [&Node; 2], n: usize) -> Result<[Vec<Trace>; 2]> {
    for node in nodes {
        node.settle(0).await?;
    }
    // A few seconds' quiet after the second server's first session.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut out = [Vec::with_capacity(n), Vec::with_capacity(n)];
    for _ in 0..n {
        for (node, samples) in nodes.iter().zip(out.iter_mut()) {
            samples.push(trace(node).await?);
        }
    }
    Ok(out)
}

async fn trace(node: &Node) -> Result<Trace> {
    node.settle(0).await?;
    let t = Instant::now();
    let c = node.connect().await?;
    let init = ms(t);
    let (first, v1) = print_1(&c).await?;
    let (second, v2) = print_1(&c).await?;
    let t = Instant::now();
    c.cancel().await?;
    Ok(Trace {
        init,
        first,
        second,
        close: ms(t),
        first_server: server_ms(&v1),
        second_server: server_ms(&v2),
    })
}
