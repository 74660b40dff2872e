//! PRIMS benchmark programs. Each compares variants measured side by side
//! in one run, so the ratios hold on a noisy machine.
//!
//! It owns the measurements behind `docs/performance.md`. It is never a
//! test: it asserts no timing and fails no build, and it is not shipped.

mod autosave;
mod branch;
mod cluster;
mod egress;
mod fresh;
mod idle;
mod inspect;
mod jail;
mod live;
mod mcp;
mod newuser;
mod original;
mod socket;
mod starts;
mod stats;

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(about = "PRIMS benchmarks")]
struct Args {
    /// The prims binary (default: next to this one).
    #[arg(long, global = true)]
    prims: Option<PathBuf>,
    #[command(subcommand)]
    command: Bench,
}

#[derive(Subcommand)]
enum Bench {
    /// `prims run` of `pass` against the unjailed venv python.
    Jail {
        #[arg(long, default_value_t = 50)]
        runs: usize,
    },
    /// A socket client of a fresh supervisor: latency, cached requirements, throughput.
    Socket {
        #[arg(long, default_value_t = 100)]
        runs: usize,
        /// Policy for the supervisor (default: built-in defaults).
        #[arg(long)]
        policy: Option<PathBuf>,
    },
    /// `run_code print(1)` through MCP over HTTP, against the socket in the same run.
    Mcp {
        #[arg(long, default_value_t = 100)]
        runs: usize,
        /// Policy for `prims serve` (default: built-in defaults).
        #[arg(long)]
        policy: Option<PathBuf>,
    },
    /// Three nodes behind HAProxy (scripts/cluster-local.sh) against one
    /// node reached directly: latency and 8-session throughput, with
    /// kept-alive connections and with a new connection per call (needs root).
    Cluster {
        /// Latency samples of each kind, and calls per throughput round
        /// (shorter rounds measure mostly the machine's noise).
        #[arg(long, default_value_t = 1000)]
        runs: usize,
        /// scripts/cluster-local.sh (default: the one in this source tree).
        #[arg(long)]
        script: Option<PathBuf>,
    },
    /// An evaluation harness's load: independent programs, each in a new
    /// interpreter (`fresh: true`) through the supervisor socket, 4 at a
    /// time, against the same programs as bare `python3 -I -c` processes 4
    /// at a time, rounds alternating. Interpreters fork from a template,
    /// as by default; give a policy with `interpreters.fork_templates =
    /// false` to measure cold ones.
    Fresh {
        /// Rounds of each kind.
        #[arg(long, default_value_t = 5)]
        rounds: usize,
        /// Times the 16 programs repeat in one batch.
        #[arg(long, default_value_t = 5)]
        repeat: usize,
        #[arg(long)]
        policy: Option<PathBuf>,
        /// The python the bare programs run with.
        #[arg(long, default_value = "/usr/bin/python3")]
        python: PathBuf,
    },
    /// What idle sessions that used pandas hold, over many sessions: the
    /// host's MemAvailable drop and their cgroups, with any template and
    /// the warm pool up before and after. Run it as it is (forked, the
    /// default) and with `interpreters.fork_templates = false` (cold).
    Idle {
        /// Sessions opened (at least 8).
        #[arg(long, default_value_t = 8)]
        sessions: usize,
        #[arg(long)]
        policy: Option<PathBuf>,
    },
    /// Live interpreters through MCP: the same session, a new session's
    /// first call from the warm pool, 8 concurrent sessions and idle
    /// memory, each beside a new interpreter per call (`fresh: true`).
    /// Without `--policy` the server's policy is the defaults with
    /// `interpreters.pool_size = 8`; a given policy is used as it is and
    /// must set `pool_size` to at least 8.
    Live {
        /// Samples of each latency (at least 20).
        #[arg(long, default_value_t = 20)]
        runs: usize,
        /// Rounds of the 8 concurrent sessions, of each kind.
        #[arg(long, default_value_t = 5)]
        rounds: usize,
        #[arg(long)]
        policy: Option<PathBuf>,
        /// Run the cases against two servers at once, without the kernel
        /// layer (`python.ipython_packages = []`) and with the default one
        /// built from the package index, alternating between them; both
        /// columns in one table. Writes its own policies.
        #[arg(long, conflicts_with = "policy")]
        compare_ipython: bool,
    },
    /// The egress proxy's cost on a 1 MiB download, against a direct
    /// download in the same run (needs root).
    Egress {
        #[arg(long, default_value_t = 50)]
        runs: usize,
        /// The download's size.
        #[arg(long, default_value_t = 1 << 20)]
        bytes: usize,
    },
    /// What inspecting TLS adds to an HTTPS request, against a tunnel in
    /// the same run (needs root).
    Inspect {
        #[arg(long, default_value_t = 200)]
        runs: usize,
    },
    /// What a new user gets from a `prims serve` started seconds before on a
    /// fresh state directory, all through MCP over HTTP: the first call
    /// after /health, HumanEval-style programs against bare python, idle
    /// pandas sessions, bursts of new sessions, calls in one session, and
    /// a new session's first call traced, beside a second server in
    /// allowlist mode (needs root).
    Newuser(newuser::Options),
    /// Branching a live session through MCP: 4 usable branches of a
    /// session holding a 10 MB and a 200 MB DataFrame, and a rollback to
    /// a checkpoint with the next call (needs root).
    Branch {
        /// Samples of each, per frame size (at least 3).
        #[arg(long, default_value_t = 10)]
        rounds: usize,
        #[arg(long)]
        policy: Option<PathBuf>,
    },
    /// PRIMS's `run_code` against the original's fresh venv + pip install per call.
    Original {
        /// Calls made the original's way (each takes seconds).
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// PRIMS calls made after each of those.
        #[arg(long, default_value_t = 10)]
        prims_per: usize,
        /// The interpreter the original's venvs are made from.
        #[arg(long, default_value = "/usr/bin/python3")]
        python: PathBuf,
    },
    /// What a new interpreter costs a new session's first call, forked and
    /// cold, with no warm pool; with `--against`, a second build in
    /// alternating rounds of the same run (needs root).
    Starts {
        /// First calls per server and round (at least 5).
        #[arg(long, default_value_t = 40)]
        samples: usize,
        /// Rounds; each starts a server per build and path.
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Another build's prims binary (its prims-jailer beside it).
        #[arg(long)]
        against: Option<PathBuf>,
        /// The IPython layer the servers bind (scripts/ipython-site.sh makes it).
        #[arg(long, default_value = "/var/lib/prims-tests/ipython-site")]
        ipython_site: PathBuf,
    },
    /// What the background save of a session's globals costs: CPU per
    /// save, and print(1) latency with autosave on (the default) and off,
    /// side by side (needs root).
    Autosave {
        /// Seconds of calls per round.
        #[arg(long, default_value_t = 60)]
        seconds: u64,
        /// Rounds; each starts both servers.
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// The session's state: small, or large (about 12 MB more).
        #[arg(long, default_value = "small")]
        state: String,
        /// The IPython layer the servers bind (scripts/ipython-site.sh makes it).
        #[arg(long, default_value = "/var/lib/prims-tests/ipython-site")]
        ipython_site: PathBuf,
    },
}

fn main() -> Result<()> {
    let args = Args::parse();
    let prims = match args.prims {
        Some(p) => p,
        None => std::env::current_exe()?.with_file_name("prims"),
    };
    match args.command {
        Bench::Jail { runs } => jail::main(runs, prims),
        Bench::Socket { runs, policy } => socket::main(runs, prims, policy),
        Bench::Mcp { runs, policy } => mcp::main(runs, prims, policy),
        Bench::Cluster { runs, script } => cluster::main(runs, prims, script),
        Bench::Live {
            runs,
            rounds,
            policy,
            compare_ipython,
        } => live::main(runs, rounds, prims, policy, compare_ipython),
        Bench::Egress { runs, bytes } => egress::main(runs, bytes, prims),
        Bench::Inspect { runs } => inspect::main(runs, prims),
        Bench::Fresh {
            rounds,
            repeat,
            policy,
            python,
        } => fresh::main(rounds, repeat, prims, policy, python),
        Bench::Idle { sessions, policy } => idle::main(sessions, prims, policy),
        Bench::Newuser(o) => newuser::main(prims, o),
        Bench::Branch { rounds, policy } => branch::main(prims, rounds, policy),
        Bench::Original {
            runs,
            prims_per,
            python,
        } => original::main(runs, prims_per, prims, python),
        Bench::Starts {
            samples,
            rounds,
            against,
            ipython_site,
        } => starts::main(samples, rounds, prims, against, ipython_site),
        Bench::Autosave {
            seconds,
            rounds,
            state,
            ipython_site,
        } => autosave::main(seconds, rounds, state, prims, ipython_site),
    }
}
