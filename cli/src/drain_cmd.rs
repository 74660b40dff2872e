//! `prims drain`: take this node out of service for a restart (the
//! Kubernetes `preStop` hook, and `prims serve --drain-deadline` on
//! SIGTERM). The supervisor opens no new session from then on, the
//! front-end answers 503 to requests that name no session (the router
//! retries them on another node) and to `/health`, and existing sessions
//! keep being served. With `--wait` it returns once nothing is
//! left (no run, no working task, no open session: they close at their
//! idle TTL) or the deadline passes.

use crate::args::SocketArg;
use anyhow::{anyhow, Result};
use clap::Args;
use prims_policy::HumanDuration;
use prims_protocol::client::Client;
use prims_protocol::wire::Stats;
use std::path::Path;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const POLL: Duration = Duration::from_millis(500);

#[derive(Args)]
pub struct DrainArgs {
    #[command(flatten)]
    socket: SocketArg,
    /// Wait until the node is idle, at most --deadline.
    #[arg(long)]
    wait: bool,
    /// How long --wait waits (e.g. 10m).
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    deadline: Duration,
}

pub fn parse_duration(s: &str) -> Result<Duration, String> {
    HumanDuration::parse(s).map(|d| d.0)
}

pub fn main(args: DrainArgs) -> i32 {
    crate::report::exit_status(
        "drain",
        crate::signals::run_until_stopped(|stop| async move {
            let deadline = if args.wait {
                args.deadline
            } else {
                Duration::ZERO
            };
            drain(&args.socket.path, deadline, &stop).await.map(|_| ())
        }),
    )
}

/// Drain the supervisor at `socket`, then wait until it is idle, `limit`
/// passes or `stop` is cancelled; the last stats seen.
pub async fn drain(socket: &Path, limit: Duration, stop: &CancellationToken) -> Result<Stats> {
    let started = Instant::now();
    let client = Client::connect(socket, "prims-drain")
        .await
        .map_err(|e| anyhow!("connecting to the supervisor: {e}"))?;
    let mut s = (client.drain().await).map_err(|e| anyhow!("draining: {e}"))?;
    eprintln!("prims drain: no new sessions; {}", left(&s));
    while !idle(&s) && started.elapsed() < limit {
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(POLL) => {}
        }
        s = (client.stats().await).map_err(|e| anyhow!("asking for stats: {e}"))?;
    }
    if limit > Duration::ZERO {
        match idle(&s) {
            true => eprintln!("prims drain: idle after {:?}", started.elapsed()),
            false => eprintln!("prims drain: stopping with {} after {limit:?}", left(&s)),
        }
    }
    Ok(s)
}

fn idle(s: &Stats) -> bool {
    s.runs_active == 0 && s.runs_queued == 0 && s.tasks_working == 0 && s.sessions == 0
}

fn left(s: &Stats) -> String {
    format!(
        "{} runs, {} tasks and {} sessions open",
        s.runs_active + s.runs_queued,
        s.tasks_working,
        s.sessions
    )
}
