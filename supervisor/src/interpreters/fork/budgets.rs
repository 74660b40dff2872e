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
//!
//! A sysctl this server raises is the host's, not the server's: before it
//! writes one, it records what it found and what it sets in its state
//! directory ([`RECORD`], written atomically), and its clean stop puts each
//! back ([`restore`]), but only where the value is still the one it set.
//! A value that differs was changed since by something else (an operator,
//! another server on the host that needed more), and is left as it is.
//! The record outlives a crash: the next clean stop of a server on the
//! same state directory puts back what the crashed one raised.

use nix::sys::resource::{getrlimit, setrlimit, Resource};
use prims_protocol::jail::{JAIL_INOTIFY_INSTANCES, JAIL_INOTIFY_WATCHES, JAIL_PENDING_SIGNALS};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

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
/// jails' shares, raising those below; what each was and is. Each raise is
/// recorded in `state_dir` first, when there is one (`prims run --live
/// --forked` has none), for [`restore`].
pub(crate) fn ensure(
    proc_sys: &Path,
    jails: u64,
    state_dir: Option<&Path>,
) -> Result<Vec<Ceiling>, CeilingError> {
    // Template starts run concurrently: one read-modify-write of the record at a time.
    let _record = lock_record();
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
                // Recorded before it is written: a crash in between leaves a
                // record whose value is not there, which `restore` leaves be.
                if let Some(dir) = state_dir {
                    note_raise(dir, &name, was, need);
                }
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

/// The file in the state directory that lists the ceilings this server
/// raised (JSON: `{"raised": [{"sysctl", "was", "set"}]}`).
pub(crate) const RECORD: &str = "raised-sysctls.json";

/// A ceiling this server raised, as [`RECORD`] lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Raised {
    /// Its sysctl name (`fs.inotify.max_user_instances`).
    pub sysctl: String,
    /// What it was before this server (on this state directory) first
    /// raised it.
    pub was: u64,
    /// What this server set it to last.
    pub set: u64,
}

#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Record {
    raised: Vec<Raised>,
}

/// What a clean stop did with a ceiling the record lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Restored {
    /// Put back from `set` to `was`.
    Back(Raised),
    /// Left at `now`: no longer what this server set, so something else
    /// changed it since. Dropped from the record.
    Changed(Raised, u64),
    /// Could not be read or written: kept in the record for the next stop.
    Failed(Raised, String),
    /// Not a ceiling this server raises (a record edited by hand): dropped,
    /// never written.
    Unknown(Raised),
}

static RECORD_LOCK: Mutex<()> = Mutex::new(());

fn lock_record() -> MutexGuard<'static, ()> {
    RECORD_LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// What [`RECORD`] in `state_dir` lists; none when there is no record.
fn read_record(state_dir: &Path) -> std::io::Result<Option<Record>> {
    let mut text = Vec::new();
    match File::open(state_dir.join(RECORD)) {
        // Bounded: two entries are a few hundred bytes.
        Ok(f) => f.take(64 * 1024).read_to_end(&mut text)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    serde_json::from_slice(&text)
        .map(Some)
        .map_err(std::io::Error::other)
}

/// Replaces [`RECORD`] atomically (a temporary file renamed over it, both
/// synced: the record must outlive a power cut as the raise does), or
/// removes it when `record` lists nothing.
fn write_record(state_dir: &Path, record: &Record) -> std::io::Result<()> {
    let path = state_dir.join(RECORD);
    if record.raised.is_empty() {
        return match std::fs::remove_file(&path) {
            Ok(()) => File::open(state_dir)?.sync_all(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        };
    }
    let text = serde_json::to_vec_pretty(record).map_err(std::io::Error::other)?;
    let tmp = state_dir.join(format!("{RECORD}.tmp"));
    let written = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)?;
        f.write_all(&text)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        File::open(state_dir)?.sync_all()
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Records in `state_dir` that `sysctl` goes from `was` to `set`. If the
/// record says this server set it to `was` (an earlier raise, in this run
/// or one before a crash), the value before that is kept: the one to go
/// back to. A record that cannot be written is logged: the raise goes on
/// (templates need it), and that ceiling will not be put back.
fn note_raise(state_dir: &Path, sysctl: &str, was: u64, set: u64) {
    let noted = read_record(state_dir).and_then(|record| {
        let mut record = record.unwrap_or_default();
        let first = match record.raised.iter().position(|r| r.sysctl == sysctl) {
            Some(i) => {
                let earlier = record.raised.remove(i);
                if earlier.set == was {
                    earlier.was
                } else {
                    was
                }
            }
            None => was,
        };
        record.raised.push(Raised {
            sysctl: sysctl.to_string(),
            was: first,
            set,
        });
        write_record(state_dir, &record)
    });
    if let Err(e) = noted {
        tracing::warn!(%sysctl, was, set, error = %e,
            "could not record {} in {}: this raise will not be put back at the server's stop",
            RECORD, state_dir.display());
    }
}

/// The ceilings that `raised-sysctls.json` in `state_dir` lists as raised by the
/// server there (for `prims doctor`); none when there is no record or it
/// cannot be read.
pub fn raised(state_dir: &Path) -> Vec<Raised> {
    read_record(state_dir)
        .ok()
        .flatten()
        .map(|r| r.raised)
        .unwrap_or_default()
}

/// At a clean stop, after every template is gone: puts back each ceiling
/// that [`RECORD`] in `state_dir` lists and that still has the value this
/// server set, leaves the others (and says why), and logs each.
pub fn restore(state_dir: &Path) {
    for r in restore_under(Path::new("/proc/sys"), state_dir) {
        match r {
            Restored::Back(r) => tracing::info!(sysctl = %r.sysctl, from = r.set, to = r.was,
                "put back a host-wide ceiling that this server had raised for its fork templates"),
            Restored::Changed(r, now) => {
                tracing::warn!(sysctl = %r.sysctl, set = r.set, now, was = r.was,
                "left a host-wide ceiling that this server had raised as it is: it is no longer the value this server set, so something else changed it since (an operator, or another server on this host that needed more)")
            }
            Restored::Failed(r, error) => {
                tracing::warn!(sysctl = %r.sysctl, set = r.set, was = r.was, %error,
                "could not put back a host-wide ceiling that this server had raised; the next clean stop tries again")
            }
            Restored::Unknown(r) => tracing::warn!(sysctl = %r.sysctl,
                "{} names a sysctl this server never raises: ignored", RECORD),
        }
    }
}

/// [`restore`], with the sysctls under `proc_sys`; what became of each.
pub(crate) fn restore_under(proc_sys: &Path, state_dir: &Path) -> Vec<Restored> {
    let _record = lock_record();
    let record = match read_record(state_dir) {
        Ok(Some(record)) => record,
        Ok(None) => return Vec::new(),
        Err(e) => {
            tracing::warn!(error = %e, "{} in {} cannot be read: no host-wide ceiling is put back",
                RECORD, state_dir.display());
            return Vec::new();
        }
    };
    let mut keep = Vec::new();
    let mut out = Vec::new();
    for r in record.raised {
        // Only a file of ours is ever written, whatever the record says.
        let Some((file, _)) = SHARED.iter().find(|(f, _)| f.replace('/', ".") == r.sysctl) else {
            out.push(Restored::Unknown(r));
            continue;
        };
        let path = proc_sys.join(file);
        let now = std::fs::read_to_string(&path)
            .and_then(|t| t.trim().parse::<u64>().map_err(std::io::Error::other));
        // Between this read and the write another writer goes unseen; the
        // window is one syscall wide.
        let done = match now {
            Ok(now) if now != r.set => Ok(Restored::Changed(r.clone(), now)),
            Ok(_) => std::fs::write(&path, r.was.to_string()).map(|()| Restored::Back(r.clone())),
            Err(e) => Err(e),
        };
        match done {
            Ok(d) => out.push(d),
            Err(e) => {
                keep.push(r.clone());
                out.push(Restored::Failed(r, e.to_string()));
            }
        }
    }
    if let Err(e) = write_record(state_dir, &Record { raised: keep }) {
        tracing::warn!(error = %e, "could not update {} in {}", RECORD, state_dir.display());
    }
    out
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
        let got = ensure(d.path(), 10, None).unwrap();
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

    const INSTANCES: &str = "fs.inotify.max_user_instances";

    fn raised(sysctl: &str, was: u64, set: u64) -> Raised {
        Raised {
            sysctl: sysctl.into(),
            was,
            set,
        }
    }

    #[test]
    fn a_raise_is_recorded_and_put_back_at_the_stop() {
        let d = sys("128\n", "10000000\n");
        let state = tempfile::tempdir().unwrap();
        ensure(d.path(), 10, Some(state.path())).unwrap();
        assert_eq!(super::raised(state.path()), [raised(INSTANCES, 128, 640)]);
        // A later raise (more sessions after a reload) keeps the first value.
        ensure(d.path(), 11, Some(state.path())).unwrap();
        assert_eq!(super::raised(state.path()), [raised(INSTANCES, 128, 704)]);
        // What does not need raising is neither written nor recorded.
        assert_eq!(read(&d, "fs/inotify/max_user_watches"), "10000000\n");
        assert_eq!(
            restore_under(d.path(), state.path()),
            [Restored::Back(raised(INSTANCES, 128, 704))]
        );
        assert_eq!(read(&d, "fs/inotify/max_user_instances"), "128");
        assert!(!state.path().join(RECORD).exists());
        // Nothing left to do at the next stop.
        assert_eq!(restore_under(d.path(), state.path()), []);
    }

    #[test]
    fn a_ceiling_changed_since_is_left_as_it_is() {
        let d = sys("128\n", "10000000\n");
        let state = tempfile::tempdir().unwrap();
        ensure(d.path(), 10, Some(state.path())).unwrap();
        std::fs::write(d.path().join("fs/inotify/max_user_instances"), "1000\n").unwrap();
        assert_eq!(
            restore_under(d.path(), state.path()),
            [Restored::Changed(raised(INSTANCES, 128, 640), 1000)]
        );
        assert_eq!(read(&d, "fs/inotify/max_user_instances"), "1000\n");
        assert!(!state.path().join(RECORD).exists());
    }

    #[test]
    fn the_record_outlives_a_crash_and_a_restart_that_needs_no_raise() {
        let d = sys("128\n", "10000000\n");
        let state = tempfile::tempdir().unwrap();
        ensure(d.path(), 10, Some(state.path())).unwrap();
        // The next server on this state directory finds the ceiling high enough.
        ensure(d.path(), 10, Some(state.path())).unwrap();
        assert_eq!(super::raised(state.path()), [raised(INSTANCES, 128, 640)]);
        restore_under(d.path(), state.path());
        assert_eq!(read(&d, "fs/inotify/max_user_instances"), "128");
    }

    #[test]
    fn a_raise_over_a_value_someone_else_set_goes_back_to_that_value() {
        let d = sys("128\n", "10000000\n");
        let state = tempfile::tempdir().unwrap();
        ensure(d.path(), 2, Some(state.path())).unwrap();
        std::fs::write(d.path().join("fs/inotify/max_user_instances"), "200").unwrap();
        ensure(d.path(), 10, Some(state.path())).unwrap();
        assert_eq!(super::raised(state.path()), [raised(INSTANCES, 200, 640)]);
    }

    #[test]
    fn a_record_names_only_our_sysctls_and_a_failed_put_back_stays_recorded() {
        let d = sys("640\n", "10000000\n");
        let state = tempfile::tempdir().unwrap();
        let record = Record {
            raised: vec![
                raised("kernel.core_pattern", 1, 2),
                raised(INSTANCES, 128, 640),
                raised("fs.inotify.max_user_watches", 8192, 10_000_000),
            ],
        };
        write_record(state.path(), &record).unwrap();
        // The watches cannot be written back (here: a directory in its place).
        std::fs::remove_file(d.path().join("fs/inotify/max_user_watches")).unwrap();
        std::fs::create_dir(d.path().join("fs/inotify/max_user_watches")).unwrap();
        let got = restore_under(d.path(), state.path());
        assert_eq!(
            got[0],
            Restored::Unknown(raised("kernel.core_pattern", 1, 2))
        );
        assert_eq!(got[1], Restored::Back(raised(INSTANCES, 128, 640)));
        assert!(
            matches!(&got[2], Restored::Failed(r, _) if r.sysctl == "fs.inotify.max_user_watches")
        );
        assert!(!d.path().join("kernel").exists());
        assert_eq!(
            super::raised(state.path()),
            [raised("fs.inotify.max_user_watches", 8192, 10_000_000)]
        );
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
        let e = ensure(d.path(), 2, None).unwrap_err().to_string();
        assert!(
            e.starts_with("fs.inotify.max_user_instances is 0, under the 128"),
            "{e}"
        );
        let missing = tempfile::tempdir().unwrap();
        let e = ensure(missing.path(), 2, None).unwrap_err().to_string();
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
