//! `prims-jailer --spec-fd N --outcome-fd M [--proxy-fd P] [--channel-fd C]`:
//! read a job spec from fd N, run it in a fresh jail, write one outcome
//! record (JSON) to fd M. With network mode `proxy`, the jail's listener is
//! sent on the Unix socket P. C (one end of a socket pair) becomes python's
//! fd 3; neither this process nor the jail's init keeps a copy once python
//! has it.
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

fn main() {
    let start = Instant::now();
    // A signal meant for the server must not end a jail before the
    // supervisor has saved its session (see `signals`).
    prims_jailer::signals::ignore_server_stops();
    let fds = match prims_jailer::args::parse(std::env::args().skip(1)) {
        Ok(fds) => fds,
        Err(msg) => {
            eprintln!("prims-jailer: {msg}");
            std::process::exit(2);
        }
    };
    let (spec_fd, outcome_fd) = (fds.spec, fds.outcome);
    // Nothing but stdio and our fds may reach the jail.
    close_others(&fds.all());
    // SAFETY: the caller handed us these fds; nothing else in this process owns them.
    let proxy = fds.proxy.map(|fd| unsafe { OwnedFd::from_raw_fd(fd) });
    // SAFETY: the caller handed us this fd; nothing else in this process owns it.
    let channel = fds.channel.map(|fd| unsafe { OwnedFd::from_raw_fd(fd) });
    // SAFETY: the caller handed us this fd; nothing else in this process owns it.
    let adopt = fds.adopt.map(|fd| unsafe { OwnedFd::from_raw_fd(fd) });
    // SAFETY: the caller handed us these fds; nothing else in this process owns them.
    let mut spec_file = unsafe { File::from_raw_fd(spec_fd) };
    // SAFETY: the caller handed us this fd; nothing else in this process owns it.
    let mut out_file = unsafe { File::from_raw_fd(outcome_fd) };
    let spec = prims_jailer::read_spec(&mut spec_file);
    drop(spec_file);
    let outcome: Outcome = match spec {
        Err(e) => prims_jailer::setup_failure(&e, start),
        Ok(spec) => prims_jailer::run(&spec, proxy, channel, adopt),
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
