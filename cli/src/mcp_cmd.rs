//! `prims mcp`: the unprivileged MCP front-end on HTTP. Started as root it
//! binds first, then drops to `--user` before anything else runs.

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use prims_mcp::{FrontendConfig, FrontendOptions};
use prims_policy::Policy;
use prims_supervisor::frontend_user::{self, Account, FRONTEND_USER};
use std::net::SocketAddr;
use std::path::PathBuf;
use tokio_util::sync::CancellationToken;

#[derive(Args)]
pub struct McpArgs {
    /// Address to listen on (keep it on loopback unless tokens are configured).
    #[arg(long, default_value = "127.0.0.1:9000")]
    pub listen: SocketAddr,
    /// The supervisor's Unix socket.
    #[arg(long, default_value = crate::SOCKET)]
    pub socket: PathBuf,
    /// Policy TOML, for the egress and session settings (default: built-in defaults).
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// Front-end config TOML: bearer tokens and tenants, extra allowed origins and hosts.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// User to run as; required when started as root (privileges are dropped after
    /// binding). Never root or nobody: the supervisor trusts this user's uid.
    #[arg(long)]
    pub user: Option<String>,
}

pub fn main(args: McpArgs) -> i32 {
    match run(args) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("prims mcp: {}", crate::run_cmd::render(&e));
            1
        }
    }
}

fn user_name(uid: u32) -> String {
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(u)) => u.name,
        _ => uid.to_string(),
    }
}

/// `name`'s account, which must exist and be the front-end's alone.
pub fn frontend_account(name: &str) -> Result<Account> {
    let ids = frontend_user::lookup(name)?.ok_or_else(|| anyhow!("no user named {name}"))?;
    frontend_user::refuse_shared(name, ids.uid)?;
    Ok(ids)
}

/// setgroups, setgid, setuid to `name`, then check root cannot come back.
/// Must run before any other thread exists.
fn drop_to(name: &str) -> Result<()> {
    let ids = frontend_account(name)?;
    let groups = [ids.gid as libc::gid_t];
    // SAFETY: plain syscalls on values; the process is still single-threaded.
    unsafe {
        if libc::setgroups(1, groups.as_ptr()) != 0 {
            return Err(std::io::Error::last_os_error()).context("setgroups");
        }
        if libc::setgid(ids.gid) != 0 {
            return Err(std::io::Error::last_os_error()).context("setgid");
        }
        if libc::setuid(ids.uid) != 0 {
            return Err(std::io::Error::last_os_error()).context("setuid");
        }
        if libc::setuid(0) == 0 || libc::geteuid() == 0 {
            bail!("dropping privileges failed: root is still reachable");
        }
    }
    tracing::info!(
        user = name,
        uid = ids.uid,
        gid = ids.gid,
        "dropped privileges"
    );
    Ok(())
}

fn run(args: McpArgs) -> Result<()> {
    let policy = match &args.policy {
        Some(p) => Policy::load(p).map_err(|e| anyhow!("{e}"))?,
        None => Policy::default(),
    };
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
        (None, me) => frontend_user::refuse_shared(&user_name(me), me)?,
    }
    if !listen.ip().is_loopback() && config.tokens.is_empty() {
        tracing::warn!(%listen, "listening beyond loopback with no bearer tokens configured");
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async move {
        let shutdown = CancellationToken::new();
        stop_on_signals(&shutdown);
        let listener = tokio::net::TcpListener::from_std(listener)?;
        eprintln!("prims mcp: serving MCP at http://{listen}/mcp");
        // Type=notify: the port is bound and privileges are dropped.
        if let Err(e) = sd_notify::notify(false, &[sd_notify::NotifyState::Ready]) {
            tracing::warn!(error = %e, "could not tell systemd the front-end is ready");
        }
        let opts = FrontendOptions {
            socket: args.socket,
            policy,
            config,
            listen,
        };
        prims_mcp::serve(listener, opts, shutdown)
            .await
            .map_err(|e| anyhow!("{e}"))
    })
}

/// Cancel `token` on SIGINT or SIGTERM. The handlers are in place when this
/// returns (it must be called inside a runtime).
pub fn stop_on_signals(token: &CancellationToken) {
    use tokio::signal::unix::{signal, SignalKind};
    for kind in [SignalKind::interrupt(), SignalKind::terminate()] {
        match signal(kind) {
            Ok(mut s) => {
                let stop = token.clone();
                tokio::spawn(async move {
                    s.recv().await;
                    stop.cancel();
                });
            }
            Err(e) => tracing::warn!(error = %e, "cannot catch a stop signal"),
        }
    }
}
