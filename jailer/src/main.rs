//! `prims-jailer --spec-fd N --outcome-fd M [--proxy-fd P]`: read a job
//! spec from fd N, run it in a fresh jail, write one outcome record (JSON)
//! to fd M. With network mode `proxy`, the jail's listener is sent on the
//! Unix socket P.
//!
//! python's stdout and stderr are this process's fds 1 and 2. Exit status:
//! 0 when python ran (whatever its outcome), 1 when the jail could not be
//! built (the outcome says why), 2 on bad arguments, 3 when the outcome
//! could not be written.

use prims_protocol::jail::Outcome;
use std::fs::File;
use std::io::Write;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::time::Instant;

struct Fds {
    spec: RawFd,
    outcome: RawFd,
    proxy: Option<RawFd>,
}

fn parse_args() -> Result<Fds, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut spec = None;
    let mut outcome = None;
    let mut proxy = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let val = it
            .next()
            .and_then(|v| v.parse::<RawFd>().ok())
            .filter(|v| *v > 2);
        match a.as_str() {
            "--spec-fd" => spec = val,
            "--outcome-fd" => outcome = val,
            "--proxy-fd" => proxy = Some(val.ok_or("--proxy-fd takes an fd above 2")?),
            _ => return Err(format!("unknown argument {a:?}")),
        }
    }
    match (spec, outcome) {
        (Some(s), Some(o)) if s != o && proxy != Some(s) && proxy != Some(o) => Ok(Fds {
            spec: s,
            outcome: o,
            proxy,
        }),
        _ => Err(
            "usage: prims-jailer --spec-fd N --outcome-fd M [--proxy-fd P] (fds > 2 and distinct)"
                .into(),
        ),
    }
}

fn main() {
    let start = Instant::now();
    let fds = match parse_args() {
        Ok(fds) => fds,
        Err(msg) => {
            eprintln!("prims-jailer: {msg}");
            std::process::exit(2);
        }
    };
    let (spec_fd, outcome_fd) = (fds.spec, fds.outcome);
    // Nothing but stdio and our fds may reach the jail.
    let mut keep = vec![spec_fd, outcome_fd];
    keep.extend(fds.proxy);
    close_others(&keep);
    // SAFETY: the caller handed us this fd; nothing else in this process owns it.
    let proxy = fds.proxy.map(|fd| unsafe { OwnedFd::from_raw_fd(fd) });
    // SAFETY: the caller handed us these fds; nothing else in this process owns them.
    let mut spec_file = unsafe { File::from_raw_fd(spec_fd) };
    // SAFETY: as above.
    let mut out_file = unsafe { File::from_raw_fd(outcome_fd) };
    let spec = prims_jailer::read_spec(&mut spec_file);
    drop(spec_file);
    let outcome: Outcome = match spec {
        Err(e) => prims_jailer::setup_failure(&e, start),
        Ok(spec) => prims_jailer::run(&spec, proxy),
    };
    let json = serde_json::to_vec(&outcome).unwrap_or_else(|_| b"{}".to_vec());
    if out_file
        .write_all(&json)
        .and_then(|_| out_file.flush())
        .is_err()
    {
        std::process::exit(3);
    }
    if outcome.status == prims_protocol::jail::Status::SetupError {
        std::process::exit(1);
    }
}

fn close_others(keep: &[RawFd]) {
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    let fds: Vec<RawFd> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|fd| *fd > 2 && !keep.contains(fd))
        .collect();
    for fd in fds {
        // SAFETY: closing an inherited fd that nothing in this process uses.
        unsafe { libc::close(fd) };
    }
    for (k, _) in std::env::vars_os().collect::<Vec<_>>() {
        // SAFETY: single-threaded at this point; nothing reads the environment concurrently.
        unsafe { std::env::remove_var(k) };
    }
}
