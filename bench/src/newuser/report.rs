//! The newuser benchmark's tables, in markdown, each named by its phase.

use super::first::FirstCall;
use super::load::{Burst, FreshRound, BURST_CALLS, BURST_SESSIONS};
use super::node::LogSummary;
use super::options::Options;
use super::sessions::{Idle, Trace, PANDAS};
use crate::fresh::programs::PARALLEL;

use crate::stats::{stats, Stats};
use prims_protocol::wire::Stats as SupStats;

const MIB: f64 = (1 << 20) as f64;

pub(super) struct Results {
    pub first: FirstCall,
    pub fresh: Vec<FreshRound>,
    pub idle: Idle,
    pub burst: Burst,
    pub same: Vec<f64>,
    pub allow_first: FirstCall,
    /// Phase 7's new sessions: the default server's, the allowlist one's.
    pub traces: (Vec<Trace>, Vec<Trace>),
    pub templates: bool,
    /// The supervisors' counters at the end: default, allowlist.
    pub stats: [SupStats; 2],
    /// `/health` at the end, and whether a settle gave up waiting for a
    /// fork template: default, allowlist.
    pub health: Vec<(String, bool)>,
    pub logs: Vec<LogSummary>,
    /// The 1-minute load average as each phase began.
    pub loads: Vec<(&'static str, Option<f64>)>,
}

fn p50(xs: &[f64]) -> String {
    if xs.is_empty() {
        return "–".into();
    }
    format!("{:.1}", stats(xs.to_vec()).median)
}

fn pick(ts: &[Trace], f: impl Fn(&Trace) -> Option<f64>) -> Vec<f64> {
    ts.iter().filter_map(f).collect()
}

fn opt(x: Option<f64>) -> String {
    x.map_or("–".into(), |v| format!("{v:.1}"))
}

pub(super) fn print(r: &Results, o: &Options, batch: usize) {
    println!(
        "\nprims-bench newuser: policy {}, fork_templates {}; rmcp client, one pool of kept-alive HTTP connections\n",
        o.policy
            .as_deref()
            .map_or("defaults".into(), |p| p.display().to_string()),
        if r.templates { "on" } else { "off" },
    );
    first_calls(r);
    fresh(r, batch);
    idle(&r.idle);
    burst(&r.burst, o.rounds);
    let s: Stats = stats(r.same.clone());
    println!(
        "\n## 5. `print(1)` in one session ({} calls)\n",
        r.same.len()
    );
    println!("| | min ms | p50 ms | p90 ms |\n|---|---|---|---|");
    println!("{}", s.row("MCP `run_code print(1)`, kept session"));
    traces(r);
    counters(r);
    let loads: Vec<String> = r
        .loads
        .iter()
        .map(|(phase, l)| format!("{phase}: {}", opt(*l)))
        .collect();
    println!(
        "\nmachine load (1-min loadavg) as each phase began: {}",
        loads.join(", ")
    );
}

fn first_calls(r: &Results) {
    println!("## 1. First call after /health (ms from the process start unless said)\n");
    println!("| | default server | allowlist server (phase 6) |\n|---|---|---|");
    let (a, b) = (&r.first, &r.allow_first);
    let rows: [(&str, String, String); 7] = [
        (
            "port listening",
            format!("{:.0}", a.startup.listen_ms),
            format!("{:.0}", b.startup.listen_ms),
        ),
        (
            "`GET /health` first 200 (its status)",
            format!("{:.0} ({})", a.startup.health_ms, a.startup.health_status),
            format!("{:.0} ({})", b.startup.health_ms, b.startup.health_status),
        ),
        (
            "`/health` first said `ok` (polled every 100 ms)",
            opt(a.base_env_ms),
            opt(b.base_env_ms),
        ),
        (
            "MCP initialize, right after the 200 (ms)",
            format!("{:.1}", a.init_ms),
            format!("{:.1}", b.init_ms),
        ),
        (
            "first `run_code print(1)` (ms)",
            format!("{:.1}", a.call_ms),
            format!("{:.1}", b.call_ms),
        ),
        (
            "its `duration_ms` (the server's own)",
            opt(a.server_ms),
            opt(b.server_ms),
        ),
        (
            "notifications it brought",
            a.notes.len().to_string(),
            b.notes.len().to_string(),
        ),
    ];
    for (what, x, y) in rows {
        println!("| {what} | {x} | {y} |");
    }
    for (at, what) in &a.notes {
        println!("- default server, {at:.1} ms after initialize began: {what}");
    }
}

fn fresh(r: &Results, batch: usize) {
    println!(
        "\n## 2. Programs, `fresh: true` through MCP ({PARALLEL} workers, an MCP session each) vs bare `python3 -I -c` ({PARALLEL} at a time); {batch} programs a batch\n"
    );
    println!("| round | began (s after process start) | PRIMS programs/s | bare programs/s | PRIMS / bare |");
    println!("|---|---|---|---|---|");
    let mut ratios = Vec::new();
    for (i, f) in r.fresh.iter().enumerate() {
        let ratio = f.prims / f.bare;
        ratios.push(ratio);
        println!(
            "| {} | {:.1} | {:.1} | {:.1} | {ratio:.2}× |",
            i + 1,
            f.at_s,
            f.prims,
            f.bare
        );
    }
    println!("median PRIMS / bare: {:.2}×", stats(ratios).median);
}

fn idle(i: &Idle) {
    let n = i.sessions as f64;
    let ((pss0, procs0), (pss1, procs1)) = i.pss;
    let drop = i.available.0.saturating_sub(i.available.1) as f64;
    println!(
        "\n## 3. {} idle sessions that ran `{PANDAS}` (pool full and settled before and after)\n",
        i.sessions
    );
    println!("| per idle session | MiB |\n|---|---|");
    println!(
        "| MemAvailable drop ({:.1} MiB over {}) | {:.1} |",
        drop / MIB,
        i.sessions,
        drop / MIB / n
    );
    println!(
        "| PSS of the server's processes ({:.1} → {:.1} MiB, {procs0} → {procs1} processes) | {:.1} |",
        pss0 as f64 / MIB,
        pss1 as f64 / MIB,
        pss1.saturating_sub(pss0) as f64 / MIB / n
    );
    println!(
        "the pandas cell as each session's first call: p50 {} ms",
        p50(&i.first_calls)
    );
}

fn burst(b: &Burst, rounds: usize) {
    println!(
        "\n## 4. {BURST_SESSIONS} new MCP sessions × {BURST_CALLS} `print(1)` at once, {rounds} bursts (each from a settled server)\n"
    );
    let rates: Vec<String> = b.rates.iter().map(|x| format!("{x:.1}")).collect();
    println!(
        "calls/s over each whole burst (initialize to close): {}; median {}",
        rates.join(", "),
        p50(&b.rates)
    );
    println!("\n| phase | p50 ms | samples |\n|---|---|---|");
    for (what, xs) in [
        ("initialize", &b.init),
        ("first call", &b.first),
        ("later calls", &b.later),
        ("close (DELETE)", &b.close),
    ] {
        println!("| {what} | {} | {} |", p50(xs), xs.len());
    }
}

/// One phase of a traced session, read from its [`Trace`].
type Phase = fn(&Trace) -> Option<f64>;

fn traces(r: &Results) {
    let (d, a) = (&r.traces.0, &r.traces.1);
    println!(
        "\n## 6, 7. A new session on a settled server, phase by phase: {} sessions of each server, alternating (p50 ms)\n",
        d.len()
    );
    println!("| phase | default network | allowlist |\n|---|---|---|");
    let rows: [(&str, Phase); 6] = [
        ("MCP initialize (POST)", |t| Some(t.init)),
        ("first `run_code print(1)` (phase 6)", |t| Some(t.first)),
        ("  its `duration_ms`", |t| t.first_server),
        ("second `run_code print(1)`", |t| Some(t.second)),
        ("  its `duration_ms`", |t| t.second_server),
        ("close (DELETE)", |t| Some(t.close)),
    ];
    for (what, f) in rows {
        println!("| {what} | {} | {} |", p50(&pick(d, f)), p50(&pick(a, f)));
    }
}

fn counters(r: &Results) {
    println!("\n## Supervisor counters at the end\n");
    println!("| | default server | allowlist server |\n|---|---|---|");
    let [d, a] = &r.stats;
    println!(
        "| interpreters started forked / cold | {} / {} | {} / {} |",
        d.starts_forked, d.starts_cold, a.starts_forked, a.starts_cold
    );
    println!("| templates up | {} | {} |", d.templates_up, a.templates_up);
    for ((body, gave_up), name) in r.health.iter().zip(["default", "allowlist"]) {
        println!("\n{name} server's /health at the end: {body}");
        if *gave_up {
            println!("({name} server: no fork template came up; its sessions started cold)");
        }
    }
    for log in &r.logs {
        println!(
            "\n{} serve.log: {} lines, {} WARN/ERROR, kept at {}",
            log.label,
            log.lines,
            log.worse.len(),
            log.path.display()
        );
        for line in log.worse.iter().take(10).chain(&log.builds) {
            println!("    {line}");
        }
    }
}
