//! `prims doctor`: checks this host for what the jail and the daemon need,
//! and prints each check with a fix.

use crate::args::HostArgs;
use clap::Args;
use prims_policy::Policy;
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    host: HostArgs,
}

enum Verdict {
    Ok(String),
    Warn(String, &'static str),
    Fail(String, &'static str),
}

fn kernel() -> Verdict {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let release = release.trim().to_string();
    let mut parts = release
        .split(['.', '-'])
        .filter_map(|p| p.parse::<u32>().ok());
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    if (major, minor) >= (5, 13) {
        Verdict::Ok(format!("kernel {release}"))
    } else {
        Verdict::Fail(
            format!("kernel {release} is older than 5.13"),
            "upgrade to a kernel with Landlock, clone3 and pidfds (5.13 or newer)",
        )
    }
}

fn user_namespaces() -> Verdict {
    let max = std::fs::read_to_string("/proc/sys/user/max_user_namespaces")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok());
    match max {
        Some(0) => Verdict::Fail(
            "user namespaces are disabled (user.max_user_namespaces = 0)".into(),
            "sysctl -w user.max_user_namespaces=15000",
        ),
        Some(n) => Verdict::Ok(format!("user namespaces allowed ({n})")),
        None => Verdict::Warn(
            "cannot read user.max_user_namespaces".into(),
            "check that the kernel has CONFIG_USER_NS",
        ),
    }
}

fn landlock(policy: &Policy) -> Verdict {
    match prims_jailer::landlock_abi() {
        0 if policy.landlock.required => Verdict::Fail(
            "the kernel has no Landlock and policy requires it".into(),
            "boot with lsm=...,landlock, or set landlock.required = false",
        ),
        0 => Verdict::Warn(
            "no Landlock: runs go without it (landlock.required = false)".into(),
            "boot with lsm=...,landlock",
        ),
        abi if abi < 6 => Verdict::Warn(
            format!("Landlock ABI {abi}: enforced partially (TCP rules need 4, scopes need 6)"),
            "a kernel of 6.12 or newer enforces every rule",
        ),
        abi => Verdict::Ok(format!("Landlock ABI {abi}")),
    }
}

fn cgroups(policy: &Policy, socket: &Path) -> Verdict {
    let e = match prims_supervisor::job::resolve_parents(policy) {
        Ok(p) => {
            return Verdict::Ok(format!(
                "cgroups: {:?} backend, parents {:?}",
                p.backend,
                p.dirs.values().collect::<Vec<_>>()
            ))
        }
        Err(e) => e,
    };
    // Under systemd the supervisor gets its subtree from its unit, not from
    // the shell doctor runs in: judge the running supervisor's cgroup.
    if let Some(pid) = supervisor_pid(socket) {
        return match delegated_v2_parent(pid) {
            Ok((dir, controllers)) => Verdict::Ok(format!(
                "cgroups: the running supervisor (pid {pid}) hosts jobs in {} with [{controllers}]",
                dir.display()
            )),
            Err(why) => Verdict::Fail(
                format!("cgroups: the running supervisor (pid {pid}): {why}"),
                "run it with Delegate=yes (the packaged prims-supervisor.service does)",
            ),
        };
    }
    if Path::new("/run/systemd/system").exists() {
        return Verdict::Warn(
            format!("cgroups: not from this shell: {e}"),
            "the packaged prims-supervisor.service gets a delegated cgroup: start it and run prims doctor again",
        );
    }
    Verdict::Fail(
        format!("cgroups: {e}"),
        "run under systemd with Delegate=yes (the packaged unit does), or set cgroup.backend = \"none\"",
    )
}

/// The pid of the process listening on the supervisor socket, by SO_PEERCRED.
fn supervisor_pid(socket: &Path) -> Option<i32> {
    let stream = std::os::unix::net::UnixStream::connect(socket).ok()?;
    let cred =
        nix::sys::socket::getsockopt(&stream, nix::sys::socket::sockopt::PeerCredentials).ok()?;
    Some(cred.pid())
}

/// Where a v2 supervisor puts job cgroups: the cgroup it was started in
/// (it lives in its `supervisor` leaf), with the controllers it enabled there.
fn delegated_v2_parent(pid: i32) -> Result<(PathBuf, String), String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).map_err(|e| e.to_string())?;
    let own = text
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or("it is not in a cgroup v2 hierarchy")?;
    let own = own
        .strip_suffix(prims_supervisor::daemon::SUPERVISOR_LEAF)
        .and_then(|o| o.strip_suffix('/'))
        .unwrap_or(own);
    let dir = Path::new("/sys/fs/cgroup").join(own.trim_start_matches('/'));
    let controllers = std::fs::read_to_string(dir.join("cgroup.subtree_control"))
        .map_err(|e| format!("reading {}/cgroup.subtree_control: {e}", dir.display()))?;
    let controllers = controllers.trim().to_owned();
    let missing: Vec<_> = ["memory", "pids"]
        .into_iter()
        .filter(|c| !controllers.split(' ').any(|x| x == *c))
        .collect();
    if missing.is_empty() {
        Ok((dir, controllers))
    } else {
        Err(format!(
            "{} does not hand {missing:?} to job cgroups",
            dir.display()
        ))
    }
}

fn seccomp() -> Verdict {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    if status.lines().any(|l| l.starts_with("Seccomp:")) {
        Verdict::Ok("seccomp filters available".into())
    } else {
        Verdict::Fail(
            "the kernel has no seccomp".into(),
            "use a kernel with CONFIG_SECCOMP_FILTER",
        )
    }
}

/// Which path new interpreters take: forked from a template, or cold;
/// whether the host's per-user ceilings hold every forked session's share;
/// and which of them the server on `state_dir` raised, to put back at its
/// clean stop.
fn start_path(policy: &Policy, state_dir: &Path) -> Verdict {
    let raised: Vec<String> = prims_supervisor::fork_budgets_raised(state_dir)
        .iter()
        .map(|r| format!("{} from {} to {}", r.sysctl, r.was, r.set))
        .collect();
    let raised = if raised.is_empty() {
        String::new()
    } else {
        format!(
            "; the server on this state directory raised {}, and puts each back at its clean stop unless something else changed it since",
            raised.join(", ")
        )
    };
    match start_path_verdict(policy) {
        Verdict::Ok(m) => Verdict::Ok(m + &raised),
        Verdict::Warn(m, fix) => Verdict::Warn(m + &raised, fix),
        Verdict::Fail(m, fix) => Verdict::Fail(m + &raised, fix),
    }
}

fn start_path_verdict(policy: &Policy) -> Verdict {
    if !policy.interpreters.fork_templates {
        return Verdict::Ok(
            "new interpreters start cold (interpreters.fork_templates = false)".into(),
        );
    }
    let short = prims_supervisor::fork_budget_shortfalls(policy, Path::new("/proc/sys"));
    if let Some((why, _)) = short.iter().find(|(_, raisable)| !raisable) {
        return Verdict::Fail(
            format!("fork templates: {why}, and the supervisor cannot raise it"),
            "raise it where the supervisor starts (LimitNPROC=, LimitSIGPENDING= in its unit), lower sessions.max_sessions, or set interpreters.fork_templates = false; until then interpreters start cold",
        );
    }
    if !short.is_empty() {
        let whys: Vec<&str> = short.iter().map(|(w, _)| w.as_str()).collect();
        return Verdict::Warn(
            format!("fork templates: {}", whys.join("; ")),
            "nothing to do: the supervisor raises these as its first template starts, so that each forked session keeps a cold jail's share (docs/security.md), and puts them back at its clean stop; to keep them up for good, set them in /etc/sysctl.d (docs/operations.md)",
        );
    }
    Verdict::Ok(
        "new interpreters fork from a template per environment (interpreters.fork_templates = true), each with a cold jail's kernel budgets; /metrics counts starts by path"
            .into(),
    )
}

/// Whether the running server is ready: what a new session's first call
/// needs is up (the supervisor's start-up says).
fn readiness(socket: &Path) -> Option<Verdict> {
    if !socket.exists() {
        return None;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    let stats = rt.block_on(async {
        let ask = async {
            prims_protocol::client::Client::connect(socket, "prims doctor")
                .await?
                .stats()
                .await
        };
        tokio::time::timeout(std::time::Duration::from_secs(5), ask).await
    });
    Some(match stats {
        Ok(Ok(s)) if !s.ready => Verdict::Warn(
            format!(
                "the server is starting: waiting for {}",
                s.waiting_for.join(", ")
            ),
            "wait: it reports ready (systemd's READY=1, /health 200) once these are up",
        ),
        Ok(Ok(s)) if !s.degraded.is_empty() => Verdict::Warn(
            format!("the server is ready, degraded: {}", s.degraded.join("; ")),
            "see the supervisor's log (journalctl -u prims-supervisor)",
        ),
        Ok(Ok(s)) => Verdict::Ok(format!(
            "the server is ready ({} fork template(s) up, {} session(s))",
            s.templates_up, s.sessions
        )),
        Ok(Err(e)) => Verdict::Fail(
            format!("the supervisor did not answer on its socket: {e}"),
            "systemctl status prims-supervisor",
        ),
        Err(_) => Verdict::Fail(
            "the supervisor did not answer on its socket within 5 s".into(),
            "systemctl status prims-supervisor",
        ),
    })
}

fn interpreter(policy: &Policy) -> Verdict {
    match policy.default_interpreter() {
        Some((name, path)) if path.is_file() => {
            Verdict::Ok(format!("interpreter {name}: {}", path.display()))
        }
        Some((name, path)) => Verdict::Fail(
            format!("interpreter {name}: {} does not exist", path.display()),
            "install it (apt-get install python3) or fix filesystem.interpreters",
        ),
        None => Verdict::Fail(
            "no default interpreter".into(),
            "fix filesystem.default_interpreter",
        ),
    }
}

fn uv(state_dir: &Path) -> Verdict {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join("uv").is_file()))
        .unwrap_or(false);
    if on_path || state_dir.join("tools/bin/uv").is_file() {
        Verdict::Ok("uv present".into())
    } else {
        Verdict::Warn(
            "uv is not installed yet".into(),
            "nothing to do: the supervisor installs it with pip on the first build (needs python3-pip)",
        )
    }
}

fn state_dir(dir: &Path) -> Verdict {
    let probe = dir.join(".doctor-probe");
    match std::fs::create_dir_all(dir).and_then(|_| std::fs::write(&probe, b"")) {
        Ok(()) => {
            let _ = std::fs::remove_file(&probe);
            Verdict::Ok(format!("state dir {} writable", dir.display()))
        }
        Err(e) => Verdict::Fail(
            format!("state dir {}: {e}", dir.display()),
            "run as root, or pass --state-dir on a writable filesystem",
        ),
    }
}

fn disk(policy: &Policy, dir: &Path) -> Verdict {
    match crate::doctor_disk::check(policy, dir) {
        Ok((true, msg)) => Verdict::Ok(msg),
        Ok((false, msg)) => Verdict::Warn(
            msg,
            "nothing overcommits: sessions and builds beyond what fits are refused when they start; to admit them all, lower sessions.max_sessions, sessions.disk_quota or the python sizes, or give the state directory a larger filesystem",
        ),
        Err(e) => Verdict::Fail(e, "make the state directory's filesystem reachable"),
    }
}

fn socket(path: &Path) -> Verdict {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    match std::fs::symlink_metadata(path) {
        Err(_) => Verdict::Warn(
            format!(
                "no socket at {} (is the supervisor running?)",
                path.display()
            ),
            "systemctl start prims-supervisor, or prims serve",
        ),
        Ok(m) if !m.file_type().is_socket() => Verdict::Fail(
            format!("{} is not a socket", path.display()),
            "remove it; the supervisor creates the socket",
        ),
        Ok(m) if m.permissions().mode() & 0o007 != 0 => Verdict::Fail(
            format!(
                "{} is reachable by every user (mode {:o})",
                path.display(),
                m.permissions().mode() & 0o777
            ),
            "the supervisor makes it 0660; restart it",
        ),
        Ok(m) => Verdict::Ok(format!(
            "socket {} (mode {:o})",
            path.display(),
            m.permissions().mode() & 0o777
        )),
    }
}

pub fn main(args: DoctorArgs) -> i32 {
    let policy = match args.host.policy.load() {
        Ok(p) => p,
        Err(e) => {
            println!("FAIL policy: {e}");
            return 1;
        }
    };
    let checks = [
        kernel(),
        user_namespaces(),
        landlock(&policy),
        cgroups(&policy, &args.host.socket.path),
        seccomp(),
        interpreter(&policy),
        start_path(&policy, &args.host.state.dir),
        uv(&args.host.state.dir),
        state_dir(&args.host.state.dir),
        disk(&policy, &args.host.state.dir),
        socket(&args.host.socket.path),
    ]
    .into_iter()
    .chain(readiness(&args.host.socket.path));
    let mut failed = 0;
    for c in checks {
        match c {
            Verdict::Ok(m) => println!("ok   {m}"),
            Verdict::Warn(m, fix) => println!("warn {m}\n     fix: {fix}"),
            Verdict::Fail(m, fix) => {
                failed += 1;
                println!("FAIL {m}\n     fix: {fix}");
            }
        }
    }
    i32::from(failed > 0)
}
