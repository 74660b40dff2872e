//! The supervisor's own view, read through its socket like the front-end
//! reads it: how many warm sessions the pool holds and how many
//! interpreters belong to sessions, so each sample starts from a full pool.

use anyhow::{bail, Result};
use prims_protocol::client::Client;
use prims_protocol::wire::Stats;
use std::path::Path;
use std::time::{Duration, Instant};

/// A hang guard only: a pool of 8 pandas interpreters refills in seconds.
const SETTLE_DEADLINE: Duration = Duration::from_secs(600);

pub(crate) struct Supervisor {
    client: Client,
    /// `interpreters.pool_size` of the policy in force.
    pub pool_size: u64,
}

impl Supervisor {
    pub async fn connect(socket: &Path, pool_size: u64) -> Result<Supervisor> {
        let client = Client::connect(socket, "prims-bench live").await?;
        Ok(Supervisor { client, pool_size })
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub async fn stats(&self) -> Result<Stats> {
        Ok(self.client.stats().await?)
    }

    /// Waits until the pool is full and exactly `live` interpreters belong
    /// to sessions (those of closed sessions are gone), and no run is
    /// active or queued.
    pub async fn settle(&self, live: u64) -> Result<Stats> {
        let deadline = Instant::now() + SETTLE_DEADLINE;
        loop {
            let s = self.stats().await?;
            if s.pool_ready == self.pool_size
                && s.interpreters_live == live
                && s.runs_active == 0
                && s.runs_queued == 0
            {
                return Ok(s);
            }
            if Instant::now() > deadline {
                bail!(
                    "the supervisor did not settle to a full pool of {} and {live} live \
                     interpreter(s) in {SETTLE_DEADLINE:?}: {s:?}",
                    self.pool_size
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Fails unless a session's first call took an interpreter from the
    /// pool. Reads the pool right after the call: its refill imports pandas
    /// in a new jail at idle priority, far longer than the call took.
    pub async fn check_claimed(&self) -> Result<()> {
        let s = self.stats().await?;
        if s.pool_ready >= self.pool_size {
            bail!(
                "the first call of a new session left the pool full ({} ready): it did not \
                 take a warm interpreter: {s:?}",
                s.pool_ready
            );
        }
        Ok(())
    }
}

/// The supervisor socket of a `prims serve` on `dir`.
pub(crate) fn socket_path(dir: &std::path::Path) -> std::path::PathBuf {
    dir.join("state/supervisor.sock")
}
