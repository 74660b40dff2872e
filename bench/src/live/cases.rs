//! The measured cases, each live beside "a new interpreter per call"
//! (`fresh: true` on every call, so each call starts a new jail and
//! python the way every call worked before live interpreters), the two
//! variants interleaved so they share the machine's noise.

use super::cell::{self, Cell, Expect, PANDAS, PRINT_1};
use super::socket::SocketSession;
use super::supervisor::Supervisor;
use crate::mcp::{call_run_code, connect, Conn, Mcp};
use anyhow::{bail, Result};
use std::time::Instant;

/// Sessions of case d, each making [`CALLS_PER_SESSION`] calls.
pub(crate) const SESSIONS: usize = 8;
pub(crate) const CALLS_PER_SESSION: usize = 5;

/// Samples of one case: live interpreters, a new interpreter per call,
/// and (for a and c) live through the supervisor socket instead of MCP.
#[derive(Debug, Default)]
pub(crate) struct Pair {
    pub live: Vec<f64>,
    pub fresh: Vec<f64>,
    pub socket: Vec<f64>,
}

impl Pair {
    /// Adds `more`'s samples to these.
    pub fn extend(&mut self, more: Pair) {
        self.live.extend(more.live);
        self.fresh.extend(more.fresh);
        self.socket.extend(more.socket);
    }
}

/// Case b's samples and what was timed around them.
#[derive(Debug, Default)]
pub(crate) struct FirstCalls {
    pub b: Pair,
    /// Opening the MCP connection (initialize), before each sample.
    pub handshakes: Vec<f64>,
    /// From the end of a live first call until the pool was full again:
    /// the background start of the interpreter that replaced the claimed
    /// one.
    pub refills: Vec<f64>,
}

impl FirstCalls {
    pub fn extend(&mut self, more: FirstCalls) {
        self.b.extend(more.b);
        self.handshakes.extend(more.handshakes);
        self.refills.extend(more.refills);
    }
}

/// An MCP client with its own session, opened by a first call.
pub(crate) struct Session {
    mcp: Mcp,
    id: String,
}

impl Session {
    /// A new MCP connection whose first call runs `cell`.
    pub async fn open(url: &str, cell: Cell) -> Result<Session> {
        let mcp = connect(url, Conn::PerCall).await?;
        let id = cell::run(&mcp, None, cell, false, Expect::FirstCall)
            .await?
            .session_id;
        Ok(Session { mcp, id })
    }

    /// Runs `code` unchecked but for its status; its structured result.
    pub async fn run_code(&self, code: &str) -> Result<serde_json::Value> {
        let mut args = serde_json::Map::new();
        args.insert("code".into(), code.into());
        args.insert("session_id".into(), self.id.clone().into());
        let (_, v) = call_run_code(&self.mcp, args).await?;
        if v["status"] != "ok" {
            bail!("`{code}` failed: {v}");
        }
        Ok(v)
    }

    pub async fn run(&self, cell: Cell, fresh: bool, expect: Expect) -> Result<f64> {
        Ok(cell::run(&self.mcp, Some(&self.id), cell, fresh, expect)
            .await?
            .ms)
    }

    /// Ends the MCP session (HTTP DELETE), which closes the workspace and
    /// stops its interpreter.
    pub async fn close(self) {
        let _ = self.mcp.cancel().await;
    }
}

/// Cases a (`print(1)`) and c (pandas) in one session, interleaved with
/// the same cells run with `fresh: true` in another session and through
/// the socket in a third.
pub(crate) async fn same_session(
    kept: &Session,
    fresh: &Session,
    socket: &SocketSession<'_>,
    runs: usize,
) -> Result<(Pair, Pair)> {
    let (mut a, mut c) = (Pair::default(), Pair::default());
    for _ in 0..runs {
        for (cell, pair) in [(PRINT_1, &mut a), (PANDAS, &mut c)] {
            pair.live.push(kept.run(cell, false, Expect::Kept).await?);
            pair.fresh
                .push(fresh.run(cell, true, Expect::FreshRequested).await?);
            pair.socket.push(socket.run(cell, Expect::Kept).await?);
        }
    }
    Ok((a, c))
}

/// Case b: the pandas cell as the first call of a new MCP session, each
/// sample starting from a full pool; the latency of opening the MCP
/// connection itself (initialize), which the samples do not include; and
/// how long the pool took to refill after each live sample.
pub(crate) async fn first_calls(url: &str, sup: &Supervisor, runs: usize) -> Result<FirstCalls> {
    let mut out = FirstCalls::default();
    for _ in 0..runs {
        for fresh in [false, true] {
            let t = Instant::now();
            sup.settle(0).await?;
            if fresh {
                // Right after the live sample: the claimed interpreter's
                // replacement starting in the background.
                out.refills.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            let t = Instant::now();
            let mcp = connect(url, Conn::PerCall).await?;
            out.handshakes.push(t.elapsed().as_secs_f64() * 1000.0);
            let sample = first_call(&mcp, sup, fresh).await;
            let _ = mcp.cancel().await;
            let ms = sample?;
            if fresh {
                out.b.fresh.push(ms);
            } else {
                out.b.live.push(ms);
            }
        }
    }
    Ok(out)
}

async fn first_call(mcp: &Mcp, sup: &Supervisor, fresh: bool) -> Result<f64> {
    let done = cell::run(mcp, None, PANDAS, fresh, Expect::FirstCall).await?;
    if !fresh {
        sup.check_claimed().await?;
    }
    Ok(done.ms)
}

/// Case d: [`SESSIONS`] new sessions at once, each making
/// [`CALLS_PER_SESSION`] `print(1)` calls one after another, first calls
/// included; calls per second of each round, a round of each kind in turn.
pub(crate) async fn concurrent(url: &str, sup: &Supervisor, rounds: usize) -> Result<Pair> {
    let mut d = Pair::default();
    for _ in 0..rounds {
        d.live.push(round(url, sup, false).await?);
        d.fresh.push(round(url, sup, true).await?);
    }
    Ok(d)
}

async fn round(url: &str, sup: &Supervisor, fresh: bool) -> Result<f64> {
    sup.settle(0).await?;
    let mut clients = Vec::with_capacity(SESSIONS);
    for _ in 0..SESSIONS {
        clients.push(connect(url, Conn::PerCall).await?);
    }
    let t = Instant::now();
    let tasks: Vec<_> = clients
        .into_iter()
        .map(|mcp| {
            tokio::spawn(async move {
                let r = calls(&mcp, fresh).await;
                (mcp, r)
            })
        })
        .collect();
    let mut ends = Vec::with_capacity(SESSIONS);
    for task in tasks {
        ends.push(task.await?);
    }
    let rate = (SESSIONS * CALLS_PER_SESSION) as f64 / t.elapsed().as_secs_f64();
    let mut first_error = None;
    for (mcp, r) in ends {
        let _ = mcp.cancel().await;
        if let Err(e) = r {
            first_error.get_or_insert(e);
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(rate),
    }
}

async fn calls(mcp: &Mcp, fresh: bool) -> Result<()> {
    let first = cell::run(mcp, None, PRINT_1, fresh, Expect::FirstCall).await?;
    let next = if fresh {
        Expect::FreshRequested
    } else {
        Expect::Kept
    };
    for _ in 1..CALLS_PER_SESSION {
        cell::run(mcp, Some(&first.session_id), PRINT_1, fresh, next).await?;
    }
    Ok(())
}
