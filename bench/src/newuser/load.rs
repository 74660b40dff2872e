//! Phases 2 and 4: an evaluation harness's programs through MCP against
//! bare python, and bursts of new MCP sessions.

use super::node::{ms, print_1, run, Node};
use crate::fresh::programs::PARALLEL;
use crate::fresh::{bare_batch, spread};
pub(super) use crate::live::cases::{CALLS_PER_SESSION as BURST_CALLS, SESSIONS as BURST_SESSIONS};
use anyhow::Result;
use rmcp::service::Peer;
use rmcp::RoleClient;
use std::path::Path;
use std::time::Instant;

/// One round of phase 2: programs per second, and when it began (s since
/// the server's process started).
#[derive(Debug)]
pub(super) struct FreshRound {
    pub at_s: f64,
    pub prims: f64,
    pub bare: f64,
}

/// Phase 2: `rounds` rounds, each the programs through MCP (`fresh: true`,
/// [`PARALLEL`] workers, each with an MCP session of its own, as a harness
/// runs one client per worker), then as bare `python -I -c` processes
/// [`PARALLEL`] at a time.
pub(super) async fn fresh_rounds(
    node: &Node,
    started: Instant,
    rounds: usize,
    programs: &[&'static str],
    python: &Path,
) -> Result<Vec<FreshRound>> {
    let mut workers = Vec::with_capacity(PARALLEL);
    for _ in 0..PARALLEL {
        workers.push(node.connect().await?);
    }
    let mut out = Vec::with_capacity(rounds);
    for round in 0..rounds {
        let at_s = started.elapsed().as_secs_f64();
        let peers: Vec<Peer<RoleClient>> = workers.iter().map(|w| w.peer().clone()).collect();
        let prims = mcp_batch(peers, programs).await?;
        let (python, batch) = (python.to_owned(), programs.to_vec());
        let bare = tokio::task::spawn_blocking(move || bare_batch(&python, &batch)).await??;
        eprintln!(
            "  round {} (at {at_s:.1} s): PRIMS {prims:.1}/s, bare {bare:.1}/s",
            round + 1
        );
        out.push(FreshRound { at_s, prims, bare });
    }
    for w in workers {
        let _ = w.cancel().await;
    }
    Ok(out)
}

/// Programs per second, each `fresh: true` through one of `workers`'
/// sessions, one program in flight per worker.
async fn mcp_batch(workers: Vec<Peer<RoleClient>>, programs: &[&'static str]) -> Result<f64> {
    spread(workers, programs, |peer, code| async move {
        run(&peer, code, true, "ok\n").await.map(drop)
    })
    .await
}

/// Phase 4's samples, in ms, over all rounds; calls per second of each.
#[derive(Debug, Default)]
pub(super) struct Burst {
    pub rates: Vec<f64>,
    pub init: Vec<f64>,
    pub first: Vec<f64>,
    pub later: Vec<f64>,
    pub close: Vec<f64>,
}

#[derive(Debug, Default)]
struct SessionTimes {
    init: f64,
    first: f64,
    later: Vec<f64>,
    close: f64,
}

/// Phase 4: `rounds` bursts, each from a settled server: [`BURST_SESSIONS`]
/// tasks at once, each opening a new MCP session, making [`BURST_CALLS`]
/// calls and closing it (HTTP DELETE); calls over the whole burst's time.
pub(super) async fn bursts(node: &Node, rounds: usize) -> Result<Burst> {
    let mut out = Burst::default();
    for round in 0..rounds {
        node.settle(0).await?;
        let t = Instant::now();
        let tasks: Vec<_> = (0..BURST_SESSIONS)
            .map(|_| {
                let (url, http) = (node.url.clone(), node.http.clone());
                tokio::spawn(async move { session(&url, http).await })
            })
            .collect();
        let mut times = Vec::with_capacity(BURST_SESSIONS);
        for task in tasks {
            times.push(task.await??);
        }
        let rate = (BURST_SESSIONS * BURST_CALLS) as f64 / t.elapsed().as_secs_f64();
        eprintln!("  burst {}: {rate:.1} calls/s", round + 1);
        out.rates.push(rate);
        for s in times {
            out.init.push(s.init);
            out.first.push(s.first);
            out.later.extend(s.later);
            out.close.push(s.close);
        }
    }
    Ok(out)
}

async fn session(url: &str, http: reqwest::Client) -> Result<SessionTimes> {
    let t = Instant::now();
    let c = crate::mcp::connect_pooled(url, http, ()).await?;
    let mut s = SessionTimes {
        init: ms(t),
        ..SessionTimes::default()
    };
    s.first = print_1(&c).await?.0;
    for _ in 1..BURST_CALLS {
        s.later.push(print_1(&c).await?.0);
    }
    let t = Instant::now();
    c.cancel().await?;
    s.close = ms(t);
    Ok(s)
}
