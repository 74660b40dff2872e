//! `prims-bench newuser`: what a new user gets. A `prims serve` started
//! seconds before, on a fresh state directory (so its first call waits
//! for the base environment to be built from the package index), with the
//! default policy or `--policy`, reached only through MCP over HTTP with
//! rmcp's client and one pool of kept-alive connections, as the SDKs do:
//!
//! 1. the first `run_code print(1)` right after `/health` first answers
//!    200, and the time from the process start to that 200;
//! 2. HumanEval-style programs (`fresh: true`, 4 workers, each its own
//!    MCP session) against bare `python3 -I -c` 4 at a time, rounds
//!    alternating, the first round right after the first call;
//! 3. idle sessions that ran a pandas cell: MemAvailable drop and PSS;
//! 4. bursts of 8 new sessions × 5 `print(1)`, phase by phase;
//! 5. `print(1)` in one session;
//! 6. a new session's first call on a second server in allowlist mode
//!    beside the same on this one, and
//! 7. those new sessions traced: initialize, first call, second, close.
//!
//! Run as root: `prims-bench newuser [--policy FILE] [--rounds 5]
//! [--runs 200] [--sessions 8] [--traces 10]`; with
//! `RUST_LOG=warn,prims_supervisor::envs=info` the report also shows how
//! long each environment build took. The supervisor socket is read only
//! to wait for a full pool between samples. A few minutes in all, most of
//! it the two base environments' builds and phase 2.

mod first;
mod load;
pub(crate) mod node;
mod options;
mod report;
mod sessions;

use crate::fresh::programs::PROGRAMS;
use anyhow::{bail, Context, Result};
use node::Node;
pub use options::Options;
use prims_policy::Policy;
use std::path::PathBuf;

/// What phase 6's second server adds to the policy.
const ALLOWLIST: &str = "\n[network]\nmode = \"allowlist\"\nallow = [\"pypi.org\"]\n";

pub fn main(prims: PathBuf, o: Options) -> Result<()> {
    if o.rounds < 1 || o.repeat < 1 || o.sessions < 1 || o.runs < 10 || o.traces < 1 {
        bail!("--rounds, --repeat, --sessions and --traces must be at least 1, --runs at least 10");
    }
    // SAFETY: a plain getter.
    if unsafe { libc::geteuid() } != 0 {
        bail!("run as root: `prims serve` jails code and starts the egress proxy");
    }
    let text = match &o.policy {
        Some(p) => {
            Some(std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?)
        }
        None => None,
    };
    let given = match &text {
        Some(t) => Policy::from_toml_str(t)?,
        None => Policy::default(),
    };
    // One tenant holds them all: past its share of live interpreters the
    // first would be stopped, and the memory read would never settle.
    let share = given.interpreters.max_live_per_tenant as usize;
    if o.sessions > share {
        bail!(
            "--sessions {}: at most interpreters.max_live_per_tenant ({share}) stay live for the bench's one tenant; raise it in --policy",
            o.sessions
        );
    }
    let allow_text = format!("{}{ALLOWLIST}", text.as_deref().unwrap_or_default());
    let allow = Policy::from_toml_str(&allow_text)
        .context("the policy with `[network] mode = \"allowlist\"` added")?;
    let programs: Vec<&'static str> = (0..o.repeat).flat_map(|_| PROGRAMS).collect();
    tokio::runtime::Runtime::new()?.block_on(async {
        let http = reqwest::Client::new();
        eprintln!("starting prims serve (default network policy)...");
        let (main, startup) =
            Node::start(&prims, "newuser", text.as_deref(), &given, &http).await?;
        let r = measure(&prims, &main, startup, (&allow_text, &allow), &o, &programs).await;
        let log = main.keep_log();
        main.stop();
        let mut r = r?;
        r.logs.insert(0, log?);
        report::print(&r, &o, programs.len());
        Ok(())
    })
}

async fn measure(
    prims: &std::path::Path,
    main: &Node,
    startup: node::Startup,
    (allow_text, allow): (&str, &Policy),
    o: &Options,
    programs: &[&'static str],
) -> Result<report::Results> {
    let started = startup.started;
    let mut loads = Vec::new();
    let mut phase = |name: &'static str, what: &str| {
        eprintln!("{name}. {what}");
        loads.push((name, node::load_1min()));
    };
    phase("1", "first call right after /health...");
    let first = first::first_call(main, startup).await?;
    phase(
        "2",
        &format!("programs, {} rounds of each kind...", o.rounds),
    );
    let fresh = load::fresh_rounds(main, started, o.rounds, programs, &o.python).await?;
    phase("3", &format!("{} idle pandas sessions...", o.sessions));
    let idle = sessions::idle_pandas(main, o.sessions).await?;
    phase("4", &format!("{} bursts of new sessions...", o.rounds));
    let burst = load::bursts(main, o.rounds).await?;
    phase("5", &format!("{} calls in one session...", o.runs));
    let same = sessions::same_session(main, o.runs).await?;
    phase("6", "starting a second prims serve in allowlist mode...");
    let (second, startup) = Node::start(
        prims,
        "newuser-allowlist",
        Some(allow_text),
        allow,
        &main.http,
    )
    .await?;
    let traced = async {
        let allow_first = first::first_call(&second, startup).await?;
        eprintln!("6, 7. {} new sessions of each server, traced...", o.traces);
        let [default, allowlist] = sessions::traces([main, &second], o.traces).await?;
        let stats = [main.sup.stats().await?, second.sup.stats().await?];
        let mut health = Vec::new();
        for node in [main, &second] {
            let body = node.health().await;
            let gave_up = node.no_template.load(std::sync::atomic::Ordering::Relaxed);
            health.push((body.map_or("(not 200)".into(), |b| b.to_string()), gave_up));
        }
        Ok::<_, anyhow::Error>((allow_first, default, allowlist, stats, health))
    }
    .await;
    let log = second.keep_log();
    second.stop();
    let (allow_first, default, allowlist, stats, health) = traced?;
    Ok(report::Results {
        first,
        fresh,
        idle,
        burst,
        same,
        allow_first,
        traces: (default, allowlist),
        templates: main.templates,
        stats,
        health,
        logs: vec![log?],
        loads,
    })
}
