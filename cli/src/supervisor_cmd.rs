//! `prims supervisor`: the privileged daemon on a Unix socket.

use anyhow::{anyhow, Context, Result};
use clap::Args;
use prims_policy::Policy;
use prims_supervisor::daemon::{self, DaemonConfig};
use std::path::PathBuf;
use tokio_util::sync::CancellationToken;

#[derive(Args)]
pub struct SupervisorArgs {
    /// Policy TOML (default: built-in defaults).
    #[arg(long)]
    policy: Option<PathBuf>,
    /// State directory: sessions, environments, audit log.
    #[arg(long, default_value = "/var/lib/prims")]
    state_dir: PathBuf,
    /// Unix socket to listen on (mode 0660).
    #[arg(long, default_value = "/run/prims/supervisor.sock")]
    socket: PathBuf,
    /// A uid besides root that may connect (the MCP front-end's); repeatable.
    #[arg(long = "allow-uid")]
    allow_uids: Vec<u32>,
    /// Group that owns the socket, so its members can connect.
    #[arg(long)]
    socket_group: Option<u32>,
    /// Path of prims-jailer (default: next to this binary).
    #[arg(long, env = "PRIMS_JAILER")]
    jailer: Option<PathBuf>,
}

pub fn main(args: SupervisorArgs) -> i32 {
    match run(args) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("prims supervisor: {}", crate::run_cmd::render(&e));
            1
        }
    }
}

fn run(args: SupervisorArgs) -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(anyhow!(
            "the supervisor must run as root: it creates namespaces, cgroups and id maps"
        ));
    }
    let policy = match &args.policy {
        Some(p) => Policy::load(p).map_err(|e| anyhow!("{e}"))?,
        None => Policy::default(),
    };
    let jailer = crate::run_cmd::jailer_path(&args.jailer)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async move {
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        tokio::spawn(async move {
            let _ = tokio::signal::ctrl_c().await;
            stop.cancel();
        });
        let stop = shutdown.clone();
        if let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            tokio::spawn(async move {
                term.recv().await;
                stop.cancel();
            });
        }
        daemon::start(
            DaemonConfig {
                policy,
                policy_path: args.policy.clone(),
                state_dir: args.state_dir,
                socket: args.socket,
                jailer,
                allowed_uids: args.allow_uids,
                socket_group: args.socket_group,
            },
            shutdown,
        )
        .await
        .map_err(|e| anyhow!("{e}"))
    })
}
