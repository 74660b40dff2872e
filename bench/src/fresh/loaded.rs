//! A new session's first pandas call, on a quiet server and under the
//! evaluation harness's sustained load (`PARALLEL` workers running fresh
//! programs without pause): with a warm pool that load drains, the figure
//! shows what a new session waits for once the pool is empty.

use super::programs::{run_fresh, run_pandas, PARALLEL, PROGRAMS};
use anyhow::{bail, Result};
use prims_protocol::client::Client;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// New sessions timed in each condition.
const SAMPLES: usize = 20;
/// Between two new sessions: a client opening sessions at a steady pace.
const PACE: Duration = Duration::from_millis(250);

/// Milliseconds of each new session's first pandas call: quiet, then loaded.
pub(super) async fn first_pandas(client: &Client, sessions: &[String]) -> Result<[Vec<f64>; 2]> {
    let quiet = sample(client).await?;
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
                    run_fresh(&client, &id, code).await?;
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
    let loaded = sample(client).await;
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.await??;
    }
    let loaded = loaded?;
    if done.load(Ordering::Relaxed) <= started {
        bail!("the load ran no program while the new sessions were timed");
    }
    Ok([quiet, loaded])
}

async fn sample(client: &Client) -> Result<Vec<f64>> {
    let mut ms = Vec::new();
    for _ in 0..SAMPLES {
        let id = client.open_session(None).await?.session_id;
        let t = Instant::now();
        run_pandas(client, &id).await?;
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
        client.close_session(&id, None).await?;
        tokio::time::sleep(PACE).await;
    }
    Ok(ms)
}

/// `| condition | p50 | p90 |` rows, in milliseconds.
pub(super) fn report(samples: &[Vec<f64>; 2]) {
    println!("\n| a new session's first pandas call (supervisor socket) | p50 ms | p90 ms |");
    println!("|---|---|---|");
    for (name, v) in [
        ("quiet", &samples[0]),
        ("under the load above, without pause", &samples[1]),
    ] {
        let mut v = v.clone();
        v.sort_by(|a, b| a.total_cmp(b));
        let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
        println!("| {name} | {:.1} | {:.1} |", at(0.5), at(0.9));
    }
}
