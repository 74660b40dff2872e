//! Arguments several subcommands share, each flattened into the commands
//! that take it, so a flag means the same everywhere.

use anyhow::{anyhow, Context, Result};
use clap::Args;
use prims_policy::Policy;
use std::path::PathBuf;

/// Where the packaged units keep state and the supervisor's socket.
pub const STATE_DIR: &str = "/var/lib/prims";
pub const SOCKET: &str = "/run/prims/supervisor.sock";

/// The host a supervisor runs on: its policy, state directory and socket.
#[derive(Args)]
pub struct HostArgs {
    #[command(flatten)]
    pub policy: PolicyArg,
    #[command(flatten)]
    pub state: StateDirArg,
    #[command(flatten)]
    pub socket: SocketArg,
}

#[derive(Args)]
pub struct PolicyArg {
    /// Policy TOML (default: the built-in defaults).
    #[arg(id = "policy", long = "policy", value_name = "FILE")]
    pub file: Option<PathBuf>,
}

impl PolicyArg {
    /// The policy file's, or the defaults; a bad file is every error in it.
    pub fn load(&self) -> Result<Policy, prims_policy::PolicyError> {
        match &self.file {
            Some(p) => Policy::load(p),
            None => Ok(Policy::default()),
        }
    }

    pub fn load_or_fail(&self) -> Result<Policy> {
        self.load().map_err(|e| anyhow!("{e}"))
    }
}

#[derive(Args)]
pub struct StateDirArg {
    /// State directory: sessions, environments, the audit log (and, for
    /// `run`, its empty venv).
    #[arg(id = "state_dir", long = "state-dir", value_name = "DIR", default_value = STATE_DIR)]
    pub dir: PathBuf,
}

#[derive(Args)]
pub struct SocketArg {
    /// The supervisor's Unix socket.
    #[arg(id = "socket", long = "socket", value_name = "PATH", default_value = SOCKET)]
    pub path: PathBuf,
}

#[derive(Args)]
pub struct JailerArg {
    /// Path of prims-jailer (default: next to this binary).
    #[arg(
        id = "jailer",
        long = "jailer",
        value_name = "PATH",
        env = "PRIMS_JAILER"
    )]
    pub path: Option<PathBuf>,
}

impl JailerArg {
    /// The flag's path, else prims-jailer beside this binary or where the
    /// package installs it.
    pub fn path(&self) -> Result<PathBuf> {
        if let Some(p) = &self.path {
            return Ok(p.clone());
        }
        let exe = std::env::current_exe().context("locating this binary")?;
        let candidates = [
            exe.with_file_name("prims-jailer"),
            PathBuf::from("/usr/libexec/prims/prims-jailer"),
        ];
        candidates.into_iter().find(|p| p.is_file()).ok_or_else(|| {
            anyhow!(
                "prims-jailer not found next to {}; pass --jailer",
                exe.display()
            )
        })
    }
}

/// `--node`: this host's number in a cluster.
#[derive(Args, Clone, Copy)]
pub struct NodeArg {
    /// This node's number in a cluster (0-65535, a StatefulSet ordinal):
    /// new session ids begin with it as four hex digits, which the router
    /// matches. Unset on a single host.
    #[arg(
        id = "node",
        long = "node",
        value_name = "N",
        env = "PRIMS_NODE",
        value_parser = parse_node
    )]
    pub id: Option<prims_protocol::node::NodeId>,
}

fn parse_node(s: &str) -> Result<prims_protocol::node::NodeId, String> {
    prims_protocol::node::NodeId::parse(s)
}
