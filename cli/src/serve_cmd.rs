//! `prims serve`: everything a new user needs in one command. Starts
//! `prims supervisor` (root) and `prims mcp` (dropped to the `prims` system
//! user, created if missing) as child processes of this same binary, prints
//! the URL and a client config, and stops both on Ctrl-C.

use crate::account::frontend_account;
use crate::args::{NodeArg, PolicyArg, StateDirArg};
use crate::signals::run_until_stopped_twice;
use anyhow::{bail, Context, Result};
use clap::Args;
use prims_supervisor::accounts::{self, Account, FRONTEND_USER};
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const SUPERVISOR_START: Duration = Duration::from_secs(60);
const FRONTEND_START: Duration = Duration::from_secs(20);
const STOP_GRACE: Duration = Duration::from_secs(25);

#[derive(Args)]
pub struct ServeArgs {
    #[command(flatten)]
    policy: PolicyArg,
    // The state directory is created if missing, and holds the socket.
    #[command(flatten)]
    state: StateDirArg,
    /// Address of the MCP endpoint.
    #[arg(long, default_value = "127.0.0.1:9000")]
    listen: SocketAddr,
    /// Front-end config TOML (bearer tokens, extra origins and hosts).
    #[arg(long)]
    config: Option<PathBuf>,
    /// User the front-end runs as, which must exist (default: `prims`, a
    /// system user created if missing). Never root or nobody: the
    /// supervisor trusts this user's uid, so it must belong to nothing else.
    #[arg(long)]
    user: Option<String>,
    #[command(flatten)]
    node: NodeArg,
    /// On SIGTERM, drain first (no new sessions; running calls finish and
    /// sessions are served until they close or this long has passed), then
    /// stop. 0 stops at once. A second SIGTERM or Ctrl-C stops at once.
    #[arg(long, default_value = "0s", value_parser = crate::drain_cmd::parse_duration)]
    drain_deadline: Duration,
}

pub fn main(args: ServeArgs) -> i32 {
    match run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("prims serve: {}", crate::report::render(&e));
            1
        }
    }
}

/// A child that is stopped (SIGTERM, then SIGKILL) when dropped.
struct Proc {
    name: &'static str,
    child: Child,
}

impl Proc {
    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// SIGTERM: a graceful stop.
    fn ask_to_stop(&mut self) {
        if self.exited().is_some() {
            return;
        }
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: kill(2) of our own child, which has not been reaped.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
    }

    fn stop(&mut self) {
        self.ask_to_stop();
        self.wait_stopped();
    }

    /// Waits for its end, up to the grace; then kills it.
    fn wait_stopped(&mut self) {
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if self.exited().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("prims serve: the {} did not stop; killing it", self.name);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Poll `ready` until it holds; `Ok(false)` if a stop signal came first.
async fn wait_until(
    what: &str,
    proc: &mut Proc,
    limit: Duration,
    stop: &CancellationToken,
    ready: impl Fn() -> bool,
) -> Result<bool> {
    let deadline = Instant::now() + limit;
    while !ready() {
        if let Some(status) = proc.exited() {
            bail!("the {} exited ({status}) before {what}", proc.name);
        }
        if Instant::now() > deadline {
            bail!("the {} did not {what} within {limit:?}", proc.name);
        }
        tokio::select! {
            _ = stop.cancelled() => return Ok(false),
            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
    }
    Ok(true)
}

/// A Claude Desktop `mcpServers` entry that reaches `url` through mcp-remote.
fn client_config(url: &str) -> String {
    let url = serde_json::Value::String(url.to_owned());
    format!(
        "{{\n  \"mcpServers\": {{\n    \"prims\": {{\n      \"command\": \"npx\",\n      \
         \"args\": [\"-y\", \"mcp-remote\", {url}, \"--transport\", \"http-only\"]\n    }}\n  }}\n}}"
    )
}

fn run(args: ServeArgs) -> Result<i32> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!(
            "prims serve must run as root: the supervisor builds namespaces and cgroups (try sudo)"
        );
    }
    // Handlers first: a Ctrl-C during start-up must still stop the children.
    run_until_stopped_twice(|stop, now| serve(args, stop, now))
}

async fn serve(args: ServeArgs, stop: CancellationToken, now: CancellationToken) -> Result<i32> {
    let (user, ids) = match args.user.clone() {
        Some(u) => {
            let ids = frontend_account(&u)?;
            (u, ids)
        }
        None => {
            let ids = accounts::ensure_system_user(FRONTEND_USER, "PRIMS MCP front-end")
                .with_context(|| {
                    format!(
                        "the front-end needs a user of its own (create `{FRONTEND_USER}`, \
                     or pass --user NAME)"
                    )
                })?;
            accounts::refuse_shared(FRONTEND_USER, ids.uid)?;
            (FRONTEND_USER.to_owned(), ids)
        }
    };
    std::fs::create_dir_all(&args.state.dir)
        .with_context(|| format!("creating {}", args.state.dir.display()))?;
    // Traversable by the front-end's user, so it can reach the socket; not listable.
    std::fs::set_permissions(&args.state.dir, std::fs::Permissions::from_mode(0o711))?;
    reachable_by(&args.state.dir, &user, &ids)?;
    let socket = args.state.dir.join("supervisor.sock");
    let exe = std::env::current_exe().context("finding this program")?;

    let mut sup = Command::new(&exe);
    sup.arg("supervisor")
        .arg("--state-dir")
        .arg(&args.state.dir)
        .arg("--socket")
        .arg(&socket)
        .arg("--allow-uid")
        .arg(ids.uid.to_string())
        .arg("--socket-group")
        .arg(ids.gid.to_string());
    if let Some(p) = &args.policy.file {
        sup.arg("--policy").arg(p);
    }
    if let Some(n) = args.node.id {
        sup.arg("--node").arg(n.0.to_string());
    }
    let mut sup = spawn("supervisor", sup)?;
    let listening = || socket.exists();
    if !wait_until(
        "listen on its socket",
        &mut sup,
        SUPERVISOR_START,
        &stop,
        listening,
    )
    .await?
    {
        return Ok(0);
    }

    let mut front = Command::new(&exe);
    front
        .arg("mcp")
        .arg("--listen")
        .arg(args.listen.to_string())
        .arg("--socket")
        .arg(&socket)
        .arg("--user")
        .arg(&user);
    for (flag, value) in [("--policy", &args.policy.file), ("--config", &args.config)] {
        if let Some(v) = value {
            front.arg(flag).arg(v);
        }
    }
    if let Some(n) = args.node.id {
        front.arg("--node").arg(n.0.to_string());
    }
    let mut front = spawn("front-end", front)?;
    let probe = probe_addr(args.listen);
    let up = || std::net::TcpStream::connect_timeout(&probe, Duration::from_millis(200)).is_ok();
    if !wait_until("listen on HTTP", &mut front, FRONTEND_START, &stop, up).await? {
        return Ok(0);
    }
    print_banner(&probe, &args.state.dir, &user, args.config.is_some());

    let code = loop {
        tokio::select! {
            _ = stop.cancelled() => break 0,
            _ = tokio::time::sleep(Duration::from_millis(250)) => {}
        }
        if let Some(p) = [&mut front, &mut sup]
            .into_iter()
            .find_map(|p| p.exited().map(|st| (p.name, st)))
        {
            eprintln!("prims serve: the {} exited ({}); stopping", p.0, p.1);
            break 1;
        }
    };
    if code == 0 && args.drain_deadline > Duration::ZERO {
        eprintln!("prims serve: draining (a second signal stops at once)");
        if let Err(e) = crate::drain_cmd::drain(&socket, args.drain_deadline, &now).await {
            eprintln!("prims serve: drain failed ({e:#}); stopping");
        }
    }
    eprintln!("prims serve: stopping");
    // Both at once: the supervisor answers the calls that run (each
    // interrupted, with a result that says so) and saves every session's
    // variables; the front-end hands those answers on, then ends.
    sup.ask_to_stop();
    front.ask_to_stop();
    sup.wait_stopped();
    front.wait_stopped();
    Ok(code)
}

fn spawn(name: &'static str, mut cmd: Command) -> Result<Proc> {
    // A process group of its own: a terminal's Ctrl-C, or a process
    // manager's signal to our group, reaches this process alone, which
    // stops both children in order; the jails are in sessions of their own.
    cmd.stdin(Stdio::null()).process_group(0);
    // And if this process dies without stopping them (a SIGKILL), each
    // child stops gracefully on its own.
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: between fork and exec the hook calls only prctl, getppid,
    // getpid and kill, which are async-signal-safe, and allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGTERM as libc::c_ulong,
                0,
                0,
                0,
            ) < 0
            {
                return Err(std::io::Error::last_os_error());
            }
            // Gone already, before the death signal was set.
            if libc::getppid() != parent {
                libc::kill(libc::getpid(), libc::SIGTERM);
            }
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .with_context(|| format!("starting the {name}"))?;
    Ok(Proc { name, child })
}

/// Where a client reaches `listen` (loopback for an unspecified address).
fn probe_addr(listen: SocketAddr) -> SocketAddr {
    let mut a = listen;
    if a.ip().is_unspecified() {
        a.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    a
}

fn print_banner(addr: &SocketAddr, state: &Path, user: &str, tokens: bool) {
    let url = format!("http://{addr}/mcp");
    println!("PRIMS is running.");
    println!("  MCP endpoint: {url}   (streamable HTTP)");
    println!(
        "  State:        {}   (front-end runs as {user})",
        state.display()
    );
    println!("  Health:       http://{addr}/health");
    println!();
    println!("Claude Desktop (claude_desktop_config.json), through mcp-remote:");
    println!("{}", client_config(&url));
    if tokens {
        println!(
            "(bearer tokens are on: add \"--header\", \"Authorization: Bearer <token>\" to args)"
        );
    }
    println!();
    println!("Press Ctrl-C to stop.");
}

/// The front-end reaches the socket inside the state dir, so every directory
/// above it must be traversable by the front-end's user; otherwise it would
/// start and fail every request with EACCES.
fn reachable_by(state_dir: &Path, user: &str, ids: &Account) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let dir = std::fs::canonicalize(state_dir)
        .with_context(|| format!("resolving {}", state_dir.display()))?;
    for a in dir.ancestors().skip(1) {
        let m = std::fs::metadata(a).with_context(|| format!("reading {}", a.display()))?;
        let bit = if m.uid() == ids.uid {
            0o100
        } else if m.gid() == ids.gid {
            0o010
        } else {
            0o001
        };
        if m.mode() & bit == 0 {
            bail!(
                "the front-end runs as {user} and could not reach the socket in {}: {} (mode {:o}) \
                 is not traversable by it; choose a state dir elsewhere or `chmod o+x {}`",
                state_dir.display(),
                a.display(),
                m.mode() & 0o7777,
                a.display()
            );
        }
    }
    Ok(())
}
