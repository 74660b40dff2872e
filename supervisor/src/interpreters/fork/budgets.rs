//! The host's per-user ceilings that every child of a template would
//! share. A cold jail's user namespace is owned by its session's own host
//! uid; a forked child's is made inside its template's, and the Linux
//! kernel checks what a namespace's processes hold against every
//! ancestor's owner as well, so each child's inotify instances and watches
//! also count against the *template's* uid on the host, up to the host-wide
//! per-user ceiling (`fs.inotify.max_user_instances`, 128 by default).
//! Two sessions could then hold all of it, and their siblings none.
//!
//! No namespace layout avoids that count (a child cannot be moved out from
//! under its template, and only its template's memory makes it a fork), so
//! the wing makes the shared count unable to bind: before a template
//! starts, each host ceiling must hold the share of every child the policy
//! allows at once, a jail's own ceiling each
//! (`prims_protocol::jail::JAIL_INOTIFY_*`), and is raised where it is
//! lower. Each child keeps its own ceiling, exactly a cold jail's.
//!
//! The per-user rlimits the kernel counts the same way are the template's
//! to lift (the jailer's `plan::variant`): its ceilings are the rlimits of
//! whoever made the namespace, unlimited where the supervisor holds
//! `CAP_SYS_RESOURCE`, else the hard limits it inherited. There, every
//! child's share must fit under them: processes (`limits.pids` each) and
//! pending signals (`JAIL_PENDING_SIGNALS` each). Message queues are no
//! budget (seccomp refuses `mq_open`); locked shared memory is counted in
//! pages against a ceiling the kernel keeps in bytes, 4096 times what a
//! jail's share needs. A host where a ceiling cannot be made to hold every
//! child's share gets no template: cold starts, as with the switch off.

use nix::sys::resource::{getrlimit, setrlimit, Resource};
use prims_protocol::jail::{JAIL_INOTIFY_INSTANCES, JAIL_INOTIFY_WATCHES, JAIL_PENDING_SIGNALS};
use std::path::Path;

/// A host-wide per-user ceiling, under `/proc/sys`, and one jail's share.
const SHARED: [(&str, u64); 2] = [
    ("fs/inotify/max_user_instances", JAIL_INOTIFY_INSTANCES),
    ("fs/inotify/max_user_watches", JAIL_INOTIFY_WATCHES),
];

/// A ceiling as found, and as left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ceiling {
    /// Its sysctl name (`fs.inotify.max_user_instances`).
    pub name: String,
    pub was: u64,
    pub now: u64,
}

#[derive(Debug, thiserror::Error)]
#[error("{name} is {was}, under the {need} that {jails} forked sessions need, and could not be raised: {source}")]
pub(crate) struct CeilingError {
    name: String,
    was: u64,
    need: u64,
    jails: u64,
    #[source]
    source: std::io::Error,
}

/// Makes every shared ceiling under `proc_sys` (`/proc/sys`) hold `jails`
/// jails' shares, raising those below; what each was and is.
pub(crate) fn ensure(proc_sys: &Path, jails: u64) -> Result<Vec<Ceiling>, CeilingError> {
    SHARED
        .iter()
        .map(|(file, share)| {
            let path = proc_sys.join(file);
            let name = file.replace('/', ".");
            let need = share.saturating_mul(jails);
            let fail = |was, source| CeilingError {
                name: name.clone(),
                was,
                need,
                jails,
                source,
            };
            let was = std::fs::read_to_string(&path)
                .map_err(|e| fail(0, e))?
                .trim()
                .parse::<u64>()
                .map_err(|e| fail(0, std::io::Error::other(e)))?;
            if was < need {
                std::fs::write(&path, need.to_string()).map_err(|e| fail(was, e))?;
            }
            Ok(Ceiling {
                name,
                was,
                now: was.max(need),
            })
        })
        .collect()
}

/// Lifts this process's rlimits that the kernel counts per user, which
/// every jailer inherits, to unlimited where it may, and checks that each
/// holds `jails` jails' shares: `pids` processes and
/// [`JAIL_PENDING_SIGNALS`] pending signals each.
pub(crate) fn lift_rlimits(jails: u64, pids: u64) -> Result<(), CeilingError> {
    let shares = [
        (Resource::RLIMIT_NPROC, "RLIMIT_NPROC", pids),
        (
            Resource::RLIMIT_SIGPENDING,
            "RLIMIT_SIGPENDING",
            JAIL_PENDING_SIGNALS,
        ),
    ];
    for (res, name, share) in shares {
        let need = share.saturating_mul(jails);
        let fail = |was, source| CeilingError {
            name: format!("the supervisor's hard {name}"),
            was,
            need,
            jails,
            source,
        };
        let unlimited = libc::RLIM_INFINITY;
        if setrlimit(res, unlimited, unlimited).is_ok() {
            continue;
        }
        let (_, hard) = getrlimit(res).map_err(|e| fail(0, e.into()))?;
        if hard < need {
            let why = std::io::Error::other(
                "without CAP_SYS_RESOURCE; raise it where the supervisor starts (LimitNPROC=, LimitSIGPENDING= in its unit) or lower sessions.max_sessions",
            );
            return Err(fail(hard, why));
        }
    }
    Ok(())
}

/// What the host lacks for `policy`'s forked sessions to keep a cold
/// jail's share each, read under `proc_sys` without changing anything:
/// each entry names a ceiling, what it is and what it needs, and whether
/// the supervisor can raise it itself. Empty when nothing is short (or
/// templates are off).
pub fn shortfalls(policy: &prims_policy::Policy, proc_sys: &Path) -> Vec<(String, bool)> {
    if !policy.interpreters.fork_templates {
        return Vec::new();
    }
    let jails = children(policy);
    let mut out = Vec::new();
    for (file, share) in SHARED {
        let need = share.saturating_mul(jails);
        let now = std::fs::read_to_string(proc_sys.join(file))
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
            .unwrap_or(0);
        if now < need {
            let name = file.replace('/', ".");
            out.push((
                format!("{name} is {now}, under the {need} that {jails} forked sessions need"),
                true,
            ));
        }
    }
    let may_lift = has_sys_resource();
    for (res, name, share) in [
        (Resource::RLIMIT_NPROC, "RLIMIT_NPROC", policy.limits.pids),
        (
            Resource::RLIMIT_SIGPENDING,
            "RLIMIT_SIGPENDING",
            JAIL_PENDING_SIGNALS,
        ),
    ] {
        let need = share.saturating_mul(jails);
        let hard = getrlimit(res).map_or(0, |(_, hard)| hard);
        if hard < need {
            out.push((
                format!(
                    "the hard {name} is {hard}, under the {need} that {jails} forked sessions need"
                ),
                may_lift,
            ));
        }
    }
    out
}

/// Whether this process holds `CAP_SYS_RESOURCE`, which lifts rlimits.
fn has_sys_resource() -> bool {
    const CAP_SYS_RESOURCE: u32 = 24;
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << CAP_SYS_RESOURCE) != 0)
}

/// The children of one template the policy allows at once: one per
/// session and per spare of the pool, and one more for a start that
/// replaces an interpreter whose jail is still ending.
pub(crate) fn children(policy: &prims_policy::Policy) -> u64 {
    u64::from(policy.sessions.max_sessions) + u64::from(policy.interpreters.pool_size) + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sys(instances: &str, watches: &str) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("fs/inotify")).unwrap();
        std::fs::write(d.path().join("fs/inotify/max_user_instances"), instances).unwrap();
        std::fs::write(d.path().join("fs/inotify/max_user_watches"), watches).unwrap();
        d
    }

    fn read(d: &tempfile::TempDir, f: &str) -> String {
        std::fs::read_to_string(d.path().join(f)).unwrap()
    }

    #[test]
    fn a_low_ceiling_is_raised_to_every_childs_share_and_a_high_one_kept() {
        let d = sys("128\n", "10000000\n");
        let got = ensure(d.path(), 10).unwrap();
        assert_eq!(
            got,
            [
                Ceiling {
                    name: "fs.inotify.max_user_instances".into(),
                    was: 128,
                    now: 640
                },
                Ceiling {
                    name: "fs.inotify.max_user_watches".into(),
                    was: 10_000_000,
                    now: 10_000_000
                },
            ]
        );
        assert_eq!(read(&d, "fs/inotify/max_user_instances"), "640");
        assert_eq!(read(&d, "fs/inotify/max_user_watches"), "10000000\n");
    }

    #[test]
    fn the_rlimits_hold_every_childs_share_or_say_which_does_not() {
        // Either lifted (CAP_SYS_RESOURCE) or checked against the hard
        // limits: a few jails fit under any host's defaults, a billion not.
        lift_rlimits(4, 64).unwrap();
        let (_, hard) = getrlimit(Resource::RLIMIT_SIGPENDING).unwrap();
        match lift_rlimits(1 << 30, 64) {
            Ok(()) => assert_eq!(hard, libc::RLIM_INFINITY),
            Err(e) => assert!(e.to_string().contains("RLIMIT_NPROC"), "{e}"),
        }
    }

    #[test]
    fn a_ceiling_that_cannot_be_read_or_raised_says_which_and_why() {
        let d = sys("many", "1");
        let e = ensure(d.path(), 2).unwrap_err().to_string();
        assert!(
            e.starts_with("fs.inotify.max_user_instances is 0, under the 128"),
            "{e}"
        );
        let missing = tempfile::tempdir().unwrap();
        let e = ensure(missing.path(), 2).unwrap_err().to_string();
        assert!(e.contains("No such file"), "{e}");
    }

    #[test]
    fn the_policy_bounds_the_children() {
        let p = prims_policy::Policy::default();
        assert_eq!(
            children(&p),
            u64::from(p.sessions.max_sessions) + u64::from(p.interpreters.pool_size) + 1
        );
    }
}
