//! `prims-bench branch`: branching a live session, what an agent pays
//! through MCP (rmcp's client, over HTTP) on a `prims serve` with the
//! default policy (or `--policy`). The source session holds a pandas
//! DataFrame of 10 MB (then 200 MB), a function, a class and a lambda
//! defined in cells, and a file. Each round measures, client-side:
//!
//! 1. 4 usable branches: `fork_session count=4`, then each branch's first
//!    `run_code` (all 4 at once), which uses the frame and the code;
//! 2. `restore_checkpoint` of a checkpoint taken once, then the next
//!    `run_code`;
//!
//! and reports the server's own `duration_ms` and the source's pause. The
//! branches of a round are closed over the supervisor socket before the
//! next (not timed), so every round forks onto the same host.
//!
//! Run as root: `prims-bench branch [--rounds 10] [--policy FILE]`.

use crate::mcp::Mcp;
use crate::newuser::node::{ms, Node};
use crate::stats::stats;
use anyhow::{anyhow, bail, Context, Result};
use rmcp::model::CallToolRequestParams;
use serde_json::{json, Map, Value};
use std::path::PathBuf;
use std::time::Instant;

/// The source's state: a frame of `rows` × 10 floats (80 bytes a row),
/// code defined in cells, and a file.
fn setup(rows: usize) -> String {
    format!(
        "import numpy as np, pandas as pd\n\
         df = pd.DataFrame(np.random.default_rng(0).random(({rows}, 10)))\n\
         def scale(v):\n    return v * 2\n\
         class Summary:\n    def __init__(self, frame):\n        self.n = len(frame)\n\
         pick = lambda frame: frame.iloc[0, 0]\n\
         open('notes.txt', 'w').write('x' * 4096)\n\
         print(len(df))"
    )
}

/// A branch's first call: it uses the frame, the code and the file.
const USE: &str = "print(Summary(df).n, scale(2), round(float(pick(df)), 3), \
                   len(open('notes.txt').read()))";

pub fn main(prims: PathBuf, rounds: usize, policy: Option<PathBuf>) -> Result<()> {
    if rounds < 3 {
        bail!("--rounds must be at least 3");
    }
    // SAFETY: a plain getter.
    if unsafe { libc::geteuid() } != 0 {
        bail!("run as root: `prims serve` jails code");
    }
    let text = match &policy {
        Some(p) => {
            Some(std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?)
        }
        None => None,
    };
    let given = match &text {
        Some(t) => prims_policy::Policy::from_toml_str(t)?,
        None => prims_policy::Policy::default(),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let http = reqwest::Client::new();
        let (node, _) = Node::start(&prims, "branch", text.as_deref(), &given, &http).await?;
        node.settle(0).await?;
        println!("## prims-bench branch: {rounds} rounds a size, through MCP\n");
        println!("| source frame | what | min | p50 | p90 |");
        println!("|---|---|---|---|---|");
        for (label, rows) in [("10 MB", 125_000usize), ("200 MB", 2_500_000)] {
            let r = size(&node, rows, rounds).await;
            match r {
                Ok(lines) => {
                    for l in lines {
                        println!("| {label} {l}");
                    }
                }
                Err(e) => println!("| {label} | failed: {e} | | | |"),
            }
        }
        node.stop();
        Ok(())
    })
}

/// The rounds of one frame size: table rows, each `| what | min | p50 | p90 |`.
async fn size(node: &Node, rows: usize, rounds: usize) -> Result<Vec<String>> {
    let c = node.connect().await?;
    let set = call(&c, "run_code", json!({ "code": setup(rows) }))
        .await?
        .1;
    if set["status"] != "ok" {
        bail!("setting up the source failed: {set}");
    }
    let sid = set["session_id"]
        .as_str()
        .ok_or_else(|| anyhow!("no session_id: {set}"))?
        .to_owned();
    let (mut usable, mut fork_server, mut paused, mut first) = (vec![], vec![], vec![], vec![]);
    for _ in 0..rounds {
        node.settle(1).await?;
        let t = Instant::now();
        let (_, f) = call(&c, "fork_session", json!({"session_id": sid, "count": 4})).await?;
        let branches: Vec<String> = f["sessions"]
            .as_array()
            .ok_or_else(|| anyhow!("no sessions: {f}"))?
            .iter()
            .filter_map(|b| b["session_id"].as_str().map(str::to_owned))
            .collect();
        let calls = branches.iter().map(|b| {
            let c = &c;
            async move { call(c, "run_code", json!({"code": USE, "session_id": b})).await }
        });
        let results = futures::future::join_all(calls).await;
        usable.push(ms(t));
        fork_server.push(f["duration_ms"].as_f64().unwrap_or(f64::NAN));
        paused.push(f["source_paused_ms"].as_f64().unwrap_or(f64::NAN));
        for r in results {
            let (lat, v) = r?;
            if v["status"] != "ok" || v["state"] != "kept" {
                bail!("a branch's first call: {}\nthe fork said: {f}", v["stderr"]);
            }
            first.push(lat);
        }
        close(node, &branches).await?;
    }
    let (_, k) = call(&c, "checkpoint_session", json!({"session_id": sid})).await?;
    let id = k["checkpoint_id"].as_str().unwrap_or_default().to_owned();
    let ck_paused = k["paused_ms"].as_f64().unwrap_or(f64::NAN);
    let mut restored = Vec::new();
    for _ in 0..rounds {
        node.settle(1).await?;
        let t = Instant::now();
        call(
            &c,
            "restore_checkpoint",
            json!({"session_id": sid, "checkpoint_id": id}),
        )
        .await?;
        let (_, v) = call(&c, "run_code", json!({"code": USE, "session_id": sid})).await?;
        if v["status"] != "ok" {
            bail!("the call after a rollback: {v}");
        }
        restored.push(ms(t));
    }
    let _ = c.cancel().await;
    Ok(vec![
        stats(usable).row("4 usable branches (fork + each first call)"),
        stats(fork_server).row("fork_session, server's duration_ms"),
        stats(paused).row("the source's pause (source_paused_ms)"),
        stats(first).row("a branch's first call"),
        stats(restored).row("restore_checkpoint + the next call"),
        format!(
            "| the checkpoint's pause (paused_ms, {} bytes) | {ck_paused:.1} | | |",
            k["bytes"]
        ),
    ])
}

/// One tool call: its latency and structured result; a tool error fails.
async fn call(c: &Mcp, tool: &'static str, args: Value) -> Result<(f64, Value)> {
    let args: Map<String, Value> = match args {
        Value::Object(m) => m,
        _ => bail!("arguments must be an object"),
    };
    let t = Instant::now();
    let r = c
        .call_tool(CallToolRequestParams::new(tool).with_arguments(args))
        .await?;
    let lat = ms(t);
    if r.is_error == Some(true) {
        bail!("{tool} failed: {:?}", r.content);
    }
    let v = r
        .structured_content
        .ok_or_else(|| anyhow!("{tool}: no structured content"))?;
    Ok((lat, v))
}

/// Closes the round's branches over the supervisor socket.
async fn close(node: &Node, sessions: &[String]) -> Result<()> {
    for s in sessions {
        node.sup.client().close_session(s, None).await?;
    }
    Ok(())
}
