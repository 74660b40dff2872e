//! `prims mcp`: the unprivileged MCP front-end on HTTP. Started as root it
//! binds first, then drops to `--user` before anything else runs.

use crate::account::{drop_to, frontend_account, user_name};
use crate::args::{NodeArg, PolicyArg, SocketArg};
use crate::signals::run_until_stopped;
use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use prims_mcp::{FrontendConfig, FrontendOptions};
use prims_supervisor::accounts::{self, FRONTEND_USER};
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Args)]
pub struct McpArgs {
    /// Address to listen on (keep it on loopback unless tokens are configured).
    #[arg(long, default_value = "127.0.0.1:9000")]
    pub listen: SocketAddr,
    #[command(flatten)]
    pub socket: SocketArg,
    // The policy is read for its egress and session settings.
    #[command(flatten)]
    pub policy: PolicyArg,
    /// Front-end config TOML: bearer tokens and tenants, extra allowed origins and hosts.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// User to run as; required when started as root (privileges are dropped after
    /// binding). Never root or nobody: the supervisor trusts this user's uid.
    #[arg(long)]
    pub user: Option<String>,
    #[command(flatten)]
    pub node: NodeArg,
}

pub fn main(args: McpArgs) -> i32 {
    crate::report::exit_status("mcp", run(args))
}

fn run(args: McpArgs) -> Result<()> {
    let policy = args.policy.load_or_fail()?;
    let config = match &args.config {
        Some(p) => FrontendConfig::load(p)?,
        None => FrontendConfig::default(),
    };
    let listener = std::net::TcpListener::bind(args.listen)
        .with_context(|| format!("binding {}", args.listen))?;
    listener.set_nonblocking(true)?;
    let listen = listener.local_addr()?;
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    match (&args.user, euid) {
        (None, 0) => bail!(
            "refusing to run as root: the front-end faces the network; pass --user NAME \
             (e.g. --user {FRONTEND_USER}) to drop privileges after binding"
        ),
        (Some(u), 0) => drop_to(u)?,
        (Some(u), me) => {
            let ids = frontend_account(u)?;
            if ids.uid != me {
                bail!(
                    "--user {u} needs root to switch to; running as {}",
                    user_name(me)
                );
            }
        }
        // Started as its user already (the packaged unit's `User=`).
        (None, me) => accounts::refuse_shared(&user_name(me), me)?,
    }
    if !listen.ip().is_loopback() && config.tokens.is_empty() {
        tracing::warn!(%listen, "listening beyond loopback with no bearer tokens configured");
    }
    run_until_stopped(|shutdown| async move {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        eprintln!("prims mcp: serving MCP at http://{listen}/mcp");
        // Type=notify: the port is bound and privileges are dropped.
        if let Err(e) = sd_notify::notify(false, &[sd_notify::NotifyState::Ready]) {
            tracing::warn!(error = %e, "could not tell systemd the front-end is ready");
        }
        let opts = FrontendOptions {
            socket: args.socket.path,
            policy,
            config,
            listen,
            node: args.node.id,
        };
        prims_mcp::serve(listener, opts, shutdown)
            .await
            .map_err(|e| anyhow!("{e}"))
    })
}
