//! The live benchmark's tables, in markdown, with the product's targets.

use super::cases::{FirstCalls, Pair, CALLS_PER_SESSION, SESSIONS};
use super::idle::Memory;
use crate::stats::{stats, Stats};

pub(crate) const MIB: f64 = 1024.0 * 1024.0;

#[derive(Debug, Default)]
pub(crate) struct Results {
    pub runs: usize,
    pub rounds: usize,
    pub a: Pair,
    pub c: Pair,
    /// Calls per second of each round.
    pub d: Pair,
    /// Case b, the MCP initialize before each sample, the pool's refills.
    pub first: FirstCalls,
    pub memory: Memory,
}

/// The latency targets: case, samples, p50 target in ms.
pub(crate) fn latency_cases(r: &Results) -> [(&'static str, &Pair, f64); 3] {
    [
        ("a. `print(1)`, same session", &r.a, 8.0),
        ("b. pandas, first call of a new session", &r.first.b, 60.0),
        ("c. pandas, same session", &r.c, 10.0),
    ]
}

/// Case d's target, calls per second.
pub(crate) const D_TARGET: f64 = 150.0;

pub(crate) struct Rates {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

pub(crate) fn rates(xs: &[f64]) -> Rates {
    let s = stats(xs.to_vec());
    Rates {
        median: s.median,
        min: s.min,
        max: xs.iter().copied().fold(f64::MIN, f64::max),
    }
}

pub(crate) fn met(ok: bool) -> &'static str {
    if ok {
        "yes"
    } else {
        "**no**"
    }
}

fn latency_row(case: &str, way: &str, s: &Stats) {
    println!(
        "| {case} | {way} | {:.1} | {:.1} | {:.1} |",
        s.min, s.median, s.p90
    );
}

/// Prints every table.
pub(crate) fn print(r: &Results) {
    let cases = latency_cases(r);
    let summary: Vec<(&str, Stats, Stats, f64)> = cases
        .iter()
        .map(|(name, p, target)| {
            (
                *name,
                stats(p.live.clone()),
                stats(p.fresh.clone()),
                *target,
            )
        })
        .collect();
    println!(
        "{} samples of each latency, {} rounds of d; rmcp's client over streamable HTTP, \
         one `prims serve` with interpreters.pool_size = {}",
        r.runs, r.rounds, r.memory.pool_ready
    );
    println!("pandas cell: `import pandas as pd; print(pd.DataFrame({{'a': [1, 2]}}).a.sum())`");
    println!();
    println!("| case | interpreter | min ms | p50 ms | p90 ms |");
    println!("|---|---|---|---|---|");
    for (name, live, fresh, _) in &summary {
        latency_row(name, "live", live);
        latency_row(name, "new per call (`fresh: true`)", fresh);
    }
    for (name, p, _) in &cases {
        if !p.socket.is_empty() {
            latency_row(
                name,
                "live, supervisor socket (no MCP)",
                &stats(p.socket.clone()),
            );
        }
    }
    let h = stats(r.first.handshakes.clone());
    println!(
        "| (MCP initialize of a new connection, not in b) | | {:.1} | {:.1} | {:.1} |",
        h.min, h.median, h.p90
    );
    let f = stats(r.first.refills.clone());
    println!(
        "| (pool refill after b's claim, in the background) | | {:.1} | {:.1} | {:.1} |",
        f.min, f.median, f.p90
    );
    println!();
    let (live, fresh) = (rates(&r.d.live), rates(&r.d.fresh));
    println!(
        "| d. {SESSIONS} new sessions × {CALLS_PER_SESSION} `print(1)`, concurrent | \
         median calls/s | min | max |"
    );
    println!("|---|---|---|---|");
    for (way, x) in [("live", &live), ("new per call (`fresh: true`)", &fresh)] {
        println!("| {way} | {:.1} | {:.1} | {:.1} |", x.median, x.min, x.max);
    }
    println!();
    let m = &r.memory;
    let per_pooled = m.pool_bytes as f64 / m.pool_ready.max(1) as f64 / MIB;
    println!("| e. idle memory | MiB |");
    println!("|---|---|");
    println!(
        "| pool of {} warm interpreters | {:.1} |",
        m.pool_ready,
        m.pool_bytes as f64 / MIB
    );
    println!("| one pooled interpreter | {per_pooled:.1} |");
    println!(
        "| one idle session interpreter | {:.1} |",
        m.session_bytes as f64 / MIB
    );
    println!(
        "| its python process, RSS / PSS | {:.1} / {:.1} |",
        m.rss_bytes as f64 / MIB,
        m.pss_bytes as f64 / MIB
    );
    println!();
    println!("| target | live p50 | met | new per call p50 | live speed-up |");
    println!("|---|---|---|---|---|");
    for (name, live, fresh, target) in &summary {
        println!(
            "| {name} ≤ {target} ms | {:.1} ms | {} | {:.1} ms | {:.1}× |",
            live.median,
            met(live.median <= *target),
            fresh.median,
            fresh.median / live.median
        );
    }
    println!(
        "| d. ≥ {D_TARGET} calls/s | {:.1} calls/s | {} | {:.1} calls/s | {:.1}× |",
        live.median,
        met(live.median >= D_TARGET),
        fresh.median,
        live.median / fresh.median
    );
}
