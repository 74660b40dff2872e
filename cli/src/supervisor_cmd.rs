//! `prims supervisor`: the privileged daemon on a Unix socket.

use crate::args::{HostArgs, JailerArg, NodeArg};
use anyhow::{anyhow, Context, Result};
use clap::Args;
use prims_supervisor::accounts::{egress_account, EGRESS_USER};
use prims_supervisor::daemon::{self, DaemonConfig};
use prims_supervisor::egress::EgressProxy;
use prims_supervisor::server::NOBODY_UID;

#[derive(Args)]
pub struct SupervisorArgs {
    // The socket is created with mode 0660.
    #[command(flatten)]
    host: HostArgs,
    /// A user besides root that may connect (the MCP front-end's), by uid or
    /// name; repeatable. Never nobody (65534): it is refused even if listed.
    #[arg(long = "allow-uid", value_name = "UID|NAME")]
    allow_uids: Vec<String>,
    /// Group that owns the socket, by gid or name.
    #[arg(long, value_name = "GID|NAME")]
    socket_group: Option<String>,
    #[command(flatten)]
    jailer: JailerArg,
    #[command(flatten)]
    node: NodeArg,
    /// The egress proxy resolves NAME to these addresses instead of asking
    /// DNS (other names still go to DNS). For tests: no policy key reaches
    /// this.
    #[arg(long = "egress-resolve", value_name = "NAME=IP[,IP...]", hide = true)]
    egress_resolve: Vec<String>,
    /// The account the egress proxy runs as (its effective uid; its real
    /// and saved uids stay root's, in a user namespace where root has no
    /// name). Created as a system user if missing. Never root, nobody or an
    /// --allow-uid.
    #[arg(long, value_name = "NAME", default_value = EGRESS_USER)]
    egress_user: String,
}

pub fn main(args: SupervisorArgs) -> i32 {
    crate::report::exit_status("supervisor", run(args))
}

fn run(args: SupervisorArgs) -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(anyhow!(
            "the supervisor must run as root: it creates namespaces, cgroups and id maps"
        ));
    }
    let policy = args.host.policy.load_or_fail()?;
    let jailer = args.jailer.path()?;
    let allowed_uids = args
        .allow_uids
        .iter()
        .map(|u| resolve_uid(u))
        .collect::<Result<Vec<_>>>()?;
    let socket_group = args.socket_group.as_deref().map(resolve_gid).transpose()?;
    let prims_exe = std::env::current_exe().context("finding the prims binary")?;
    let egress_ids = egress_account(&args.egress_user, &allowed_uids).with_context(|| {
        format!(
            "the egress proxy needs a user of its own (create `{}`, or pass --egress-user NAME)",
            args.egress_user
        )
    })?;
    let egress_account = prims_supervisor::egress::Account {
        uid: egress_ids.uid,
        gid: egress_ids.gid,
    };
    crate::signals::run_until_stopped(|shutdown| async move {
        daemon::start(
            DaemonConfig {
                policy,
                policy_path: args.host.policy.file.clone(),
                state_dir: args.host.state.dir,
                socket: args.host.socket.path,
                jailer,
                allowed_uids,
                socket_group,
                egress: EgressProxy::new(prims_exe, args.egress_resolve, egress_account),
                node: args.node.id,
            },
            shutdown,
        )
        .await
        .map_err(|e| anyhow!("{e}"))
    })
}

/// A uid given as a number or a user name (packaging names the user; the
/// system picks its uid at install time). `nobody` is refused: the socket
/// would never let it in, and listing it means the front-end shares its uid.
fn resolve_uid(s: &str) -> Result<u32> {
    let uid = match s.parse() {
        Ok(uid) => uid,
        Err(_) => match nix::unistd::User::from_name(s) {
            Ok(Some(u)) => u.uid.as_raw(),
            Ok(None) => return Err(anyhow!("--allow-uid: no user named {s:?}")),
            Err(e) => return Err(anyhow!("--allow-uid: looking up user {s:?}: {e}")),
        },
    };
    if uid == NOBODY_UID {
        return Err(anyhow!(
            "--allow-uid {s}: uid {NOBODY_UID} (nobody) is shared by unrelated daemons and is \
             never allowed on the socket; run the front-end as a user of its own \
             (`prims serve` creates `prims`)"
        ));
    }
    Ok(uid)
}

/// A gid given as a number or a group name.
fn resolve_gid(s: &str) -> Result<u32> {
    if let Ok(gid) = s.parse() {
        return Ok(gid);
    }
    match nix::unistd::Group::from_name(s) {
        Ok(Some(g)) => Ok(g.gid.as_raw()),
        Ok(None) => Err(anyhow!("--socket-group: no group named {s:?}")),
        Err(e) => Err(anyhow!("--socket-group: looking up group {s:?}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_resolve_from_numbers_and_names() {
        assert_eq!(resolve_uid("1234").unwrap(), 1234);
        assert_eq!(resolve_uid("root").unwrap(), 0);
        assert_eq!(resolve_gid("0").unwrap(), 0);
        assert_eq!(resolve_gid("root").unwrap(), 0);
        for nobody in ["nobody", "65534"] {
            let e = resolve_uid(nobody).unwrap_err().to_string();
            assert!(e.contains("never allowed"), "{e}");
        }
        let e = resolve_uid("no-such-user-prims").unwrap_err().to_string();
        assert!(e.contains("no user named"), "{e}");
        let e = resolve_gid("no-such-group-prims").unwrap_err().to_string();
        assert!(e.contains("no group named"), "{e}");
    }
}
