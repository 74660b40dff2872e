//! `prims egress-proxy`: the egress proxy process of jailed code. The
//! supervisor starts it with one end of its control channel; it is never
//! started by hand.

use anyhow::{Context, Result};
use clap::Args;
use prims_egress::identity::{become_account, Account};
use prims_egress::resolve::Resolver;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

#[derive(Args)]
pub struct EgressArgs {
    /// The inherited fd of the supervisor's control channel.
    #[arg(long)]
    control_fd: RawFd,
    /// The uid of the proxy's own account (`prims-egress`).
    #[arg(long)]
    uid: u32,
    /// That account's primary group.
    #[arg(long)]
    gid: u32,
    /// Resolve NAME to these addresses instead of asking DNS (other names
    /// still go to DNS). For tests: no policy key reaches this.
    #[arg(long = "resolve", value_name = "NAME=IP[,IP...]", hide = true)]
    resolve: Vec<String>,
}

pub fn main(args: EgressArgs) -> i32 {
    match run(args) {
        Ok(()) => 0,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "egress proxy failed");
            1
        }
    }
}

fn run(args: EgressArgs) -> Result<()> {
    // The server's stop signals are the supervisor's to act on: it ends
    // the proxy (closing the control channel) once the running calls have
    // their answers. systemd's `KillMode=control-group` sends them to every
    // process of the unit.
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
        // SAFETY: signal(2) with SIG_IGN installs no handler code.
        unsafe { libc::signal(sig, libc::SIG_IGN) };
    }
    if args.control_fd < 3 {
        anyhow::bail!("--control-fd {} is a standard stream", args.control_fd);
    }
    let account = Account {
        uid: args.uid,
        gid: args.gid,
    };
    // From here on this is the proxy, in a user namespace of its own, and
    // its parent (root) waits outside it.
    become_account(account, args.control_fd).context("becoming the proxy's account")?;
    // SAFETY: the supervisor passed this fd to us alone; nothing else owns it.
    let control = unsafe { OwnedFd::from_raw_fd(args.control_fd) };
    let resolver = if args.resolve.is_empty() {
        Resolver::System
    } else {
        Resolver::fixed(&args.resolve).map_err(anyhow::Error::msg)?
    };
    match prims_egress::process::raise_fd_limit() {
        Ok(n) => tracing::debug!(open_files = n, "egress proxy: file limit raised"),
        Err(e) => tracing::warn!(error = %e, "egress proxy: the file limit stays as it was"),
    }
    let landlock = prims_egress::confine::confine().context("confining the egress proxy")?;
    tracing::info!(?landlock, uid = account.uid, "egress proxy confined");
    // All its work is waiting on sockets and splicing in the kernel: one
    // thread does it without handing each connection to another.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("the runtime")?;
    rt.block_on(async {
        let channel =
            prims_egress::control::Channel::new(control).context("the control channel")?;
        prims_egress::process::run(channel, resolver)
            .await
            .context("the control channel")
    })
}
