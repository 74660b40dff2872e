//! python starts with every signal at its default action and none blocked,
//! whatever the supervisor was started with. Ignored signals and the
//! blocked mask survive `execve`: a supervisor started from a background
//! shell job ignores SIGINT, and so would python, so an interrupt could
//! never reach the code it is meant to stop.

use crate::error::JailError;
use nix::errno::Errno;

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
