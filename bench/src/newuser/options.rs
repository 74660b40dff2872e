//! What `prims-bench newuser` takes on its command line.

use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Options {
    /// Rounds of the programs (of each kind) and of the bursts.
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// Times the 16 programs repeat in one batch (10: 160 programs, about
    /// HumanEval's 164).
    #[arg(long, default_value_t = 10)]
    pub repeat: usize,
    /// Idle pandas sessions (at most the policy's
    /// `interpreters.max_live_per_tenant`: the bench is one tenant).
    #[arg(long, default_value_t = 8)]
    pub sessions: usize,
    /// `print(1)` calls in one session.
    #[arg(long, default_value_t = 200)]
    pub runs: usize,
    /// New sessions traced on each of the two servers.
    #[arg(long, default_value_t = 10)]
    pub traces: usize,
    /// Policy for `prims serve` (default: built-in defaults); the
    /// allowlist server gets it with `[network]` added.
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// The python the bare programs run with.
    #[arg(long, default_value = "/usr/bin/python3")]
    pub python: PathBuf,
}
