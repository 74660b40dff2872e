//! One `prims serve` of the benchmark, started on a fresh state directory
//! and reached the way a new user reaches it: `/health`, then MCP over
//! HTTP with rmcp's client through one pool of kept-alive connections.
//! Its supervisor socket is read only to wait for a settled pool.

use crate::live::supervisor::{socket_path, Supervisor};
use crate::mcp::{bench_dir, call_run_code, connect_pooled, Mcp, Served};
use anyhow::{bail, Context, Result};
use rmcp::service::Peer;
use rmcp::RoleClient;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A hang guard: how long a new server may take to answer `/health` 200
/// (which may wait for the base environment's build).
const HEALTH_DEADLINE: Duration = Duration::from_secs(600);
/// How long a settle waits for a fork template before it goes on without.
const TEMPLATE_DEADLINE: Duration = Duration::from_secs(60);

pub(crate) fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

/// What the first seconds of a server took, from just before its process
/// was started.
#[derive(Debug)]
pub(crate) struct Startup {
    pub started: Instant,
    /// Until its port accepted TCP connections.
    pub listen_ms: f64,
    /// Until `GET /health` first answered 200, and the `status` it said.
    pub health_ms: f64,
    pub health_status: String,
}

pub(crate) struct Node {
    pub label: &'static str,
    pub url: String,
    pub http: reqwest::Client,
    pub sup: Supervisor,
    pub state: PathBuf,
    pub templates: bool,
    /// Set once a settle gave up waiting for a template.
    pub no_template: AtomicBool,
    health: String,
    dir: PathBuf,
    served: Served,
}

impl Node {
    /// Starts `prims serve` on a new bench directory named after `label`,
    /// with `policy` written there when given, and waits for its first
    /// `/health` 200.
    pub async fn start(
        prims: &Path,
        label: &'static str,
        policy: Option<&str>,
        given: &prims_policy::Policy,
        http: &reqwest::Client,
    ) -> Result<(Node, Startup)> {
        let dir = bench_dir(label)?;
        let file = dir.join("policy.toml");
        if let Some(text) = policy {
            std::fs::write(&file, text)?;
        }
        let started = Instant::now();
        let served = Served::start(prims, &dir, policy.map(|_| file.as_path()))?;
        let listen_ms = ms(started);
        let health = format!("http://127.0.0.1:{}/health", served.port);
        let deadline = started + HEALTH_DEADLINE;
        let health_status = loop {
            if let Some(body) = health_body(http, &health).await {
                break status(&body);
            }
            if Instant::now() > deadline {
                bail!(
                    "{label}: /health did not answer 200 in {HEALTH_DEADLINE:?}; see {}/serve.log",
                    dir.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let health_ms = ms(started);
        let sup = Supervisor::connect(&socket_path(&dir), u64::from(given.interpreters.pool_size))
            .await?;
        let node = Node {
            label,
            url: format!("http://127.0.0.1:{}/mcp", served.port),
            http: http.clone(),
            sup,
            state: dir.join("state"),
            templates: given.interpreters.fork_templates,
            no_template: AtomicBool::new(false),
            health,
            dir,
            served,
        };
        let startup = Startup {
            started,
            listen_ms,
            health_ms,
            health_status,
        };
        Ok((node, startup))
    }

    /// `/health`'s body once it answers 200, or `None`.
    pub async fn health(&self) -> Option<Value> {
        health_body(&self.http, &self.health).await
    }

    /// A new MCP session (initialize) through the shared connection pool.
    pub async fn connect(&self) -> Result<Mcp> {
        connect_pooled(&self.url, self.http.clone(), ()).await
    }

    /// Waits for a full pool, no session's interpreter but `live`, and a
    /// template when the policy wants them, unless `/health` names
    /// something degraded or none came up in [`TEMPLATE_DEADLINE`]: then
    /// it says so once and goes on with cold starts.
    pub async fn settle(&self, live: u64) -> Result<()> {
        let deadline = Instant::now() + TEMPLATE_DEADLINE;
        while self.templates && !self.no_template.load(Ordering::Relaxed) {
            if self.sup.stats().await?.templates_up > 0 {
                break;
            }
            let degraded = self.health().await.map(|b| b["degraded"].clone());
            let degraded = degraded
                .as_ref()
                .and_then(Value::as_array)
                .is_some_and(|d| !d.is_empty());
            if degraded || Instant::now() > deadline {
                eprintln!("  {}: no fork template up; going on without", self.label);
                self.no_template.store(true, Ordering::Relaxed);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        self.sup.settle(live).await?;
        Ok(())
    }

    /// Copies serve.log out of the bench directory (which is removed
    /// when the server stops) and counts its WARN and ERROR lines.
    pub fn keep_log(&self) -> Result<LogSummary> {
        let from = self.dir.join("serve.log");
        let text = std::fs::read_to_string(&from)
            .with_context(|| format!("reading {}", from.display()))?;
        let kept = self.dir.with_file_name(format!(
            "{}-serve.log",
            self.dir
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("prims-bench-newuser")
        ));
        std::fs::write(&kept, &text)?;
        let lines = |f: fn(&str) -> bool| -> Vec<String> {
            text.lines().filter(|l| f(l)).map(str::to_owned).collect()
        };
        Ok(LogSummary {
            label: self.label,
            path: kept,
            lines: text.lines().count(),
            worse: lines(|l| l.contains("WARN") || l.contains("ERROR")),
            builds: lines(|l| l.contains("environment installed")),
        })
    }

    /// Stops the server and removes its directory.
    pub fn stop(self) {
        drop(self.served);
    }
}

pub(crate) struct LogSummary {
    pub label: &'static str,
    pub path: PathBuf,
    pub lines: usize,
    /// Its WARN and ERROR lines.
    pub worse: Vec<String>,
    /// Its environment builds, timed (with `RUST_LOG` at info for
    /// `prims_supervisor::envs`).
    pub builds: Vec<String>,
}

/// The host's 1-minute load average: other work on the machine shows
/// here (ours too).
pub(super) fn load_1min() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

async fn health_body(http: &reqwest::Client, url: &str) -> Option<Value> {
    let r = http.get(url).send().await.ok()?;
    if r.status() != reqwest::StatusCode::OK {
        return None;
    }
    serde_json::from_str(&r.text().await.ok()?).ok()
}

/// A `/health` body's `status`.
pub(super) fn status(body: &Value) -> String {
    body["status"].as_str().unwrap_or("?").to_owned()
}

/// A checked `run_code` of `code` in the connection's session (with
/// `fresh: true` when `fresh`): its latency in ms and its result, which
/// must be status ok with `stdout`.
pub(super) async fn run(
    c: &Peer<RoleClient>,
    code: &str,
    fresh: bool,
    stdout: &str,
) -> Result<(f64, Value)> {
    let mut args = Map::new();
    args.insert("code".into(), code.into());
    if fresh {
        args.insert("fresh".into(), true.into());
    }
    let (ms, v) = call_run_code(c, args).await?;
    if v["status"] != "ok" || v["stdout"] != stdout {
        bail!("`{code}` answered unexpectedly: {v}");
    }
    Ok((ms, v))
}

pub(super) async fn print_1(c: &Peer<RoleClient>) -> Result<(f64, Value)> {
    run(c, "print(1)", false, "1\n").await
}

/// The server's own time for a call (`duration_ms`), when it says.
pub(super) fn server_ms(v: &Value) -> Option<f64> {
    v["duration_ms"].as_u64().map(|d| d as f64)
}
