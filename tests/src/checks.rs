//! [`Checks`]: collects every mismatch of a test before failing, and names
//! errnos for the messages.

use crate::outcome::Run;
use std::fmt::Write as _;

/// Collects mismatches so one failing test reports every one of them.
pub struct Checks<'a> {
    run: &'a Run,
    failures: Vec<String>,
    seen: Vec<String>,
}

impl Run {
    /// Start collecting checks against this run.
    pub fn checks(&self) -> Checks<'_> {
        Checks {
            run: self,
            failures: Vec::new(),
            seen: Vec::new(),
        }
    }
}

impl Checks<'_> {
    /// The syscall probe `name` returned -1 with exactly `errno`.
    pub fn sc_errno(&mut self, name: &str, errno: i32) -> &mut Self {
        match self.run.syscalls().get(name) {
            None => self
                .failures
                .push(format!("{name}: no SC line (python died before it?)")),
            Some(&(r, e)) => {
                self.seen
                    .push(format!("{name}: ret {r} errno {e} ({})", errno_name(e)));
                if r != -1 || e != errno {
                    self.failures.push(format!(
                        "{name}: expected -1 {} ({errno}), observed ret {r} errno {} ({e})",
                        errno_name(errno),
                        errno_name(e)
                    ));
                }
            }
        }
        self
    }

    /// The syscall probe `name` succeeded (returned >= 0).
    pub fn sc_ok(&mut self, name: &str) -> &mut Self {
        match self.run.syscalls().get(name) {
            None => self.failures.push(format!("{name}: no SC line")),
            Some(&(r, e)) => {
                self.seen.push(format!("{name}: ret {r} errno {e}"));
                if r < 0 {
                    self.failures.push(format!(
                        "{name}: expected success, observed ret {r} errno {} ({e})",
                        errno_name(e)
                    ));
                }
            }
        }
        self
    }

    /// The Python call `name` raised OSError with exactly `errno`.
    pub fn os_errno(&mut self, name: &str, errno: i32) -> &mut Self {
        match self.run.errors().get(name) {
            None => self.failures.push(format!("{name}: no ERR line")),
            Some(None) => {
                self.seen.push(format!("{name}: succeeded"));
                self.failures.push(format!(
                    "{name}: expected OSError {} ({errno}), but the call succeeded",
                    errno_name(errno)
                ))
            }
            Some(Some(e)) => {
                self.seen
                    .push(format!("{name}: errno {e} ({})", errno_name(*e)));
                if *e != errno {
                    self.failures.push(format!(
                        "{name}: expected {} ({errno}), observed {} ({e})",
                        errno_name(errno),
                        errno_name(*e)
                    ))
                }
            }
        }
        self
    }

    /// The Python call `name` did not raise.
    pub fn os_ok(&mut self, name: &str) -> &mut Self {
        match self.run.errors().get(name) {
            None => self.failures.push(format!("{name}: no ERR line")),
            Some(None) => self.seen.push(format!("{name}: succeeded")),
            Some(Some(e)) => self.failures.push(format!(
                "{name}: expected success, observed {} ({e})",
                errno_name(*e)
            )),
        }
        self
    }

    /// `KV name` equals `value`.
    pub fn kv_eq(&mut self, name: &str, value: &str) -> &mut Self {
        match self.run.kv(name) {
            None => self.failures.push(format!("{name}: no KV line")),
            Some(v) if v == value => self.seen.push(format!("{name}: {v}")),
            Some(v) => self
                .failures
                .push(format!("{name}: expected {value:?}, observed {v:?}")),
        }
        self
    }

    /// Record a free-form check.
    pub fn check(&mut self, ok: bool, what: impl Into<String>) -> &mut Self {
        let what = what.into();
        if ok {
            self.seen.push(what);
        } else {
            self.failures.push(what);
        }
        self
    }

    /// Panics listing every failure, with the run's outcome.
    pub fn finish(&mut self) {
        if !self.failures.is_empty() {
            let mut msg = String::new();
            let _ = writeln!(msg, "{} check(s) failed:", self.failures.len());
            for f in &self.failures {
                let _ = writeln!(msg, "  - {f}");
            }
            let _ = writeln!(msg, "checks that passed:");
            for s in &self.seen {
                let _ = writeln!(msg, "  + {s}");
            }
            panic!("{msg}\n{}", self.run.describe());
        }
    }
}

/// `EPERM (1)` style names for messages.
pub fn errno_name(e: i32) -> &'static str {
    match e {
        0 => "0",
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ESRCH => "ESRCH",
        libc::EINTR => "EINTR",
        libc::EIO => "EIO",
        libc::ENXIO => "ENXIO",
        libc::E2BIG => "E2BIG",
        libc::ENOEXEC => "ENOEXEC",
        libc::EBADF => "EBADF",
        libc::ECHILD => "ECHILD",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::EXDEV => "EXDEV",
        libc::ENODEV => "ENODEV",
        libc::ENOTDIR => "ENOTDIR",
        libc::EISDIR => "EISDIR",
        libc::EINVAL => "EINVAL",
        libc::ENFILE => "ENFILE",
        libc::EMFILE => "EMFILE",
        libc::ENOTTY => "ENOTTY",
        libc::ETXTBSY => "ETXTBSY",
        libc::EFBIG => "EFBIG",
        libc::ENOSPC => "ENOSPC",
        libc::ESPIPE => "ESPIPE",
        libc::EROFS => "EROFS",
        libc::EMLINK => "EMLINK",
        libc::EPIPE => "EPIPE",
        libc::ERANGE => "ERANGE",
        libc::ENOSYS => "ENOSYS",
        libc::ELOOP => "ELOOP",
        libc::ENOTSUP => "EOPNOTSUPP",
        libc::EAFNOSUPPORT => "EAFNOSUPPORT",
        libc::EPROTONOSUPPORT => "EPROTONOSUPPORT",
        libc::EADDRINUSE => "EADDRINUSE",
        libc::EADDRNOTAVAIL => "EADDRNOTAVAIL",
        libc::ENETDOWN => "ENETDOWN",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::EHOSTUNREACH => "EHOSTUNREACH",
        libc::EDQUOT => "EDQUOT",
        libc::ENOTSOCK => "ENOTSOCK",
        _ => "?",
    }
}
