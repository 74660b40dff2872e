//! A new session's first pandas call, on a quiet server, under the
//! evaluation harness's sustained load (`PARALLEL` workers running fresh
//! programs without pause), and under as many sessions running the same
//! programs as cells without pause. Fresh runs have scheduler slots of
//! their own and yield the CPU; other sessions' calls share the new
//! session's slots and weight.

use super::programs::{run_cell, run_program, PARALLEL, PROGRAMS};
use crate::live::cell::{Cell, PANDAS};
use anyhow::{bail, Result};
use prims_protocol::client::Client;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// New sessions timed in each condition.
const SAMPLES: usize = 20;
/// Between two new sessions: a client opening sessions at a steady pace.
const PACE: Duration = Duration::from_millis(250);

/// A pandas cell unlike `python.warm_up_code`'s default (which builds,
/// sums and prints a frame): what a first call that the pool's warm-up did
/// not foresee pays.
const UNFORESEEN: Cell = Cell {
    code: "import io, pandas as pd\n\
           t = pd.read_csv(io.StringIO('k,v\\na,1\\nb,2\\na,3\\n'))\n\
           print(t.pivot_table(index='k', values='v', aggfunc='max').v.to_dict())",
    stdout: "{'a': 3, 'b': 2}\n",
};

/// Milliseconds of each new session's first pandas call: quiet, under
/// fresh programs, under session calls; then quiet, of a cell the warm-up
/// did not foresee.
pub(super) async fn first_pandas(client: &Client, sessions: &[String]) -> Result<[Vec<f64>; 4]> {
    let quiet = sample(client, PANDAS).await?;
    let fresh = loaded(client, sessions, true).await?;
    let calls = loaded(client, sessions, false).await?;
    let unforeseen = sample(client, UNFORESEEN).await?;
    Ok([quiet, fresh, calls, unforeseen])
}

/// Samples while `PARALLEL` workers run programs without pause, each in a
/// new interpreter or as cells of their sessions.
async fn loaded(client: &Client, sessions: &[String], fresh: bool) -> Result<Vec<f64>> {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = sessions
        .iter()
        .take(PARALLEL)
        .enumerate()
        .map(|(i, id)| {
            let (client, id, stop, done) = (client.clone(), id.clone(), stop.clone(), done.clone());
            tokio::spawn(async move {
                let mut n = i;
                while !stop.load(Ordering::Relaxed) {
                    let code = PROGRAMS[n % PROGRAMS.len()];
                    n += 1;
                    run_program(&client, &id, code, fresh).await?;
                    done.fetch_add(1, Ordering::Relaxed);
                }
                Ok::<(), anyhow::Error>(())
            })
        })
        .collect();
    // The load runs a while before the first sample, so the pool is what
    // sustained load leaves of it.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let started = done.load(Ordering::Relaxed);
    let loaded = sample(client, PANDAS).await;
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.await??;
    }
    let loaded = loaded?;
    if done.load(Ordering::Relaxed) <= started {
        bail!("the load ran no program while the new sessions were timed");
    }
    Ok(loaded)
}

async fn sample(client: &Client, cell: Cell) -> Result<Vec<f64>> {
    let mut ms = Vec::new();
    for _ in 0..SAMPLES {
        let id = client.open_session(None).await?.session_id;
        let t = Instant::now();
        run_cell(client, &id, cell).await?;
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
        client.close_session(&id, None).await?;
        tokio::time::sleep(PACE).await;
    }
    Ok(ms)
}

/// `| condition | p50 | p90 |` rows, in milliseconds.
pub(super) fn report(samples: &[Vec<f64>; 4]) {
    println!("\n| a new session's first pandas call (supervisor socket) | p50 ms | p90 ms |");
    println!("|---|---|---|");
    for (name, v) in [
        ("quiet", &samples[0]),
        ("under the fresh programs above, without pause", &samples[1]),
        (
            "under 4 sessions running them as cells, without pause",
            &samples[2],
        ),
        (
            "quiet, a pivot of a parsed CSV instead (unlike the warm-up code)",
            &samples[3],
        ),
    ] {
        let mut v = v.clone();
        v.sort_by(|a, b| a.total_cmp(b));
        let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
        println!("| {name} | {:.1} | {:.1} |", at(0.5), at(0.9));
    }
}
