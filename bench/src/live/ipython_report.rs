//! The tables of `prims-bench live --compare-ipython`: each case without
//! the IPython layer (plain Python) and with it (IPython), side by side,
//! with the targets met or not by the IPython column.

use super::cases::{CALLS_PER_SESSION, SESSIONS};
use super::idle::Memory;
use super::report::{latency_cases, met, rates, Results, D_TARGET, MIB};
use crate::stats::stats;
use std::time::Duration;

/// A latency row: p50 and p90 of each server's samples, and the p50's
/// difference.
fn latency_row(case: &str, way: &str, plain: &[f64], ipython: &[f64]) {
    let (p, i) = (stats(plain.to_vec()), stats(ipython.to_vec()));
    println!(
        "| {case} | {way} | {:.1} | {:.1} | {:.1} | {:.1} | {:+.1} |",
        p.median,
        p.p90,
        i.median,
        i.p90,
        i.median - p.median
    );
}

fn memory_row(what: &str, bytes: impl Fn(&Memory) -> f64, r: &[Results; 2]) {
    let (p, i) = (bytes(&r[0].memory) / MIB, bytes(&r[1].memory) / MIB);
    println!("| {what} | {p:.1} | {i:.1} | {:+.1} |", i - p);
}

/// Prints every table; `r[0]` is the plain server's, `r[1]` IPython's.
pub(crate) fn print(r: &[Results; 2], startup: [Duration; 2]) {
    let (plain, ipython) = (&r[0], &r[1]);
    println!(
        "{} samples of each latency and {} rounds of d on each server; rmcp's client over \
         streamable HTTP; two `prims serve` at once, alternating, each with \
         interpreters.pool_size = {}: plain = `python.ipython_packages = []`, IPython = the \
         default IPython layer built from the package index",
        plain.runs, plain.rounds, plain.memory.pool_ready
    );
    println!(
        "from start to a full pool: plain {:.1} s, IPython {:.1} s (both started together; \
         IPython's includes building the IPython layer)",
        startup[0].as_secs_f64(),
        startup[1].as_secs_f64()
    );
    println!();
    println!(
        "| case | interpreter | plain p50 ms | plain p90 ms | IPython p50 ms | IPython p90 ms \
         | Δ p50 ms |"
    );
    println!("|---|---|---|---|---|---|---|");
    let cases = latency_cases(plain).map(|(name, p, _)| (name, p));
    let ipy = latency_cases(ipython).map(|(_, p, _)| p);
    for ((name, p), i) in cases.iter().zip(ipy) {
        latency_row(name, "live", &p.live, &i.live);
        latency_row(name, "new per call (`fresh: true`)", &p.fresh, &i.fresh);
        if !p.socket.is_empty() {
            latency_row(name, "live, supervisor socket", &p.socket, &i.socket);
        }
    }
    let (pf, i_f) = (&plain.first, &ipython.first);
    latency_row(
        "(MCP initialize, not in b)",
        "",
        &pf.handshakes,
        &i_f.handshakes,
    );
    latency_row(
        "(pool refill after b's claim, in the background)",
        "",
        &pf.refills,
        &i_f.refills,
    );
    println!();
    println!(
        "| d. {SESSIONS} new sessions × {CALLS_PER_SESSION} `print(1)`, concurrent | plain \
         calls/s, median (min–max) | IPython calls/s, median (min–max) | IPython / plain |"
    );
    println!("|---|---|---|---|");
    let (pd, id) = (&plain.d, &ipython.d);
    for (way, p, i) in [
        ("live", &pd.live, &id.live),
        ("new per call (`fresh: true`)", &pd.fresh, &id.fresh),
    ] {
        let (p, i) = (rates(p), rates(i));
        println!(
            "| {way} | {:.1} ({:.1}–{:.1}) | {:.1} ({:.1}–{:.1}) | {:.2}× |",
            p.median,
            p.min,
            p.max,
            i.median,
            i.min,
            i.max,
            i.median / p.median
        );
    }
    println!();
    println!("| e. idle memory, MiB | plain | IPython | Δ |");
    println!("|---|---|---|---|");
    let pool = plain.memory.pool_ready;
    memory_row(
        &format!("pool of {pool} warm interpreters (cgroups)"),
        |m| m.pool_bytes as f64,
        r,
    );
    memory_row(
        "one pooled interpreter (cgroups, mean)",
        |m| m.pool_bytes as f64 / m.pool_ready.max(1) as f64,
        r,
    );
    memory_row(
        "one idle session interpreter (cgroup)",
        |m| m.session_bytes as f64,
        r,
    );
    memory_row("its python process, RSS", |m| m.rss_bytes as f64, r);
    memory_row("its python process, PSS", |m| m.pss_bytes as f64, r);
    println!();
    println!("| target | plain | IPython | met with IPython |");
    println!("|---|---|---|---|");
    for ((name, p, target), (_, i, _)) in
        latency_cases(plain).into_iter().zip(latency_cases(ipython))
    {
        let (p, i) = (stats(p.live.clone()), stats(i.live.clone()));
        println!(
            "| {name}, p50 ≤ {target} ms | {:.1} ms | {:.1} ms | {} |",
            p.median,
            i.median,
            met(i.median <= target)
        );
    }
    let (p, i) = (rates(&plain.d.live), rates(&ipython.d.live));
    println!(
        "| d. {SESSIONS} sessions × {CALLS_PER_SESSION} calls ≥ {D_TARGET} calls/s | {:.1} \
         calls/s | {:.1} calls/s | {} |",
        p.median,
        i.median,
        met(i.median >= D_TARGET)
    );
}
