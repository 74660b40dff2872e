//! `prims`: the PRIMS command line.
//!
//! It owns the commands and their flags (`serve`, `supervisor`, `mcp`,
//! `run`, `doctor`, `drain`, `policy check`, and the hidden `egress-proxy`
//! the supervisor starts), logging, and starting each process with the
//! right privilege. Each command only parses its flags and hands over to
//! the crate that owns the work: it must never hold policy, jail, session
//! or MCP logic of its own. It must never start the supervisor without
//! root, nor serve the front-end as root or as `nobody` (it drops to the
//! `prims` user after binding, or refuses).

mod account;
mod args;
mod doctor_cmd;
mod doctor_disk;
mod drain_cmd;
mod egress_cmd;
mod logging;
mod mcp_cmd;
mod policy_cmd;
mod report;
mod run_cmd;
mod serve_cmd;
mod signals;
mod supervisor_cmd;

use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "prims",
    version,
    about = "Run untrusted Python in a Linux jail"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one script in the jail, with no server.
    Run(run_cmd::RunArgs),
    /// The privileged daemon that owns sessions, environments and jails.
    Supervisor(supervisor_cmd::SupervisorArgs),
    /// Start the supervisor and the MCP front-end together (the quick start).
    ///
    /// The supervisor runs as root. The front-end drops to the `prims` system
    /// user and group, created when missing (useradd --system: no home, a
    /// nologin shell), as the .deb does. The supervisor's socket then serves
    /// only root and that uid: the front-end never shares a uid with anything
    /// else, and never runs as nobody.
    Serve(serve_cmd::ServeArgs),
    /// The unprivileged MCP front-end (streamable HTTP) in front of a supervisor.
    Mcp(mcp_cmd::McpArgs),
    /// Take this node out of a cluster for a restart: no new sessions; with
    /// --wait, return once it is idle (the Kubernetes preStop hook).
    Drain(drain_cmd::DrainArgs),
    /// The egress proxy of jailed code; the supervisor starts it.
    #[command(hide = true)]
    EgressProxy(egress_cmd::EgressArgs),
    /// Check this host for what PRIMS needs, with a fix for each problem.
    Doctor(doctor_cmd::DoctorArgs),
    /// Policy tools.
    Policy {
        #[command(subcommand)]
        command: PolicyCommand,
    },
}

#[derive(Subcommand)]
enum PolicyCommand {
    /// Print the effective policy, or every error in FILE. Exits 0 or 1.
    Check { file: PathBuf },
}

fn main() {
    logging::init();
    let cli = Cli::parse();
    if matches!(cli.command, Command::Doctor(_) | Command::Policy { .. }) {
        // Reports that only print end quietly when their reader goes
        // (`prims doctor | head`); the daemons keep SIGPIPE ignored.
        // SAFETY: setting a signal disposition to its default, before any thread starts.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    let code = match cli.command {
        Command::Run(args) => run_cmd::main(args),
        Command::Doctor(args) => doctor_cmd::main(args),
        Command::Supervisor(args) => supervisor_cmd::main(args),
        Command::Serve(args) => serve_cmd::main(args),
        Command::Mcp(args) => mcp_cmd::main(args),
        Command::Drain(args) => drain_cmd::main(args),
        Command::EgressProxy(args) => egress_cmd::main(args),
        Command::Policy {
            command: PolicyCommand::Check { file },
        } => policy_cmd::check(&file),
    };
    std::process::exit(code);
}
