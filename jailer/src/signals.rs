//! The jailer ignores the signals that stop a server, and python starts
//! with every signal at its default action and none blocked.
//!
//! A terminal's Ctrl-C, a process manager's SIGTERM to the server's process
//! group, or systemd's to every process of the unit's cgroup
//! (`KillMode=control-group`) are meant for the server, which stops
//! gracefully: it saves each session's variables inside its jail, then
//! ends the jails itself, with SIGKILL. So the jailer (and the jail's init,
//! its clone) must outlive them; the supervisor also starts it in a
//! session of its own, away from the server's process group.
//!
//! Ignored signals and the blocked mask survive `execve`: a supervisor
//! started from a background shell job ignores SIGINT, and so would python,
//! so an interrupt could never reach the code it is meant to stop; hence
//! [`reset_for_exec`].

use crate::error::JailError;
use nix::errno::Errno;

/// What stops a server, and must not stop a jail.
const SERVER_STOPS: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// Run first: the server's stop signals are ignored from here on.
pub fn ignore_server_stops() {
    for sig in SERVER_STOPS {
        // SAFETY: signal(2) with SIG_IGN installs no handler code.
        unsafe { libc::signal(sig, libc::SIG_IGN) };
    }
}

/// Run in the forked child just before the exec.
pub fn reset_for_exec() -> Result<(), JailError> {
    for sig in 1..=libc::SIGRTMAX() {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // SAFETY: sigaction is plain data; zeroed with SIG_DFL (0) as the
        // handler is the default action.
        let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
        act.sa_sigaction = libc::SIG_DFL;
        // SAFETY: a valid sigaction and no old one asked for. Numbers the
        // C library keeps for itself fail with EINVAL and stay as they are.
        unsafe { libc::sigaction(sig, &act, std::ptr::null_mut()) };
    }
    // SAFETY: sigset_t is plain data that sigemptyset initialises.
    let mut none: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out-pointer, then a valid set and no old one asked for.
    let r = unsafe {
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut())
    };
    if r < 0 {
        return Err(JailError::Signals(Errno::last()));
    }
    Ok(())
}
