//! The jailer's watch over a running jail: wall and CPU time limits, then
//! the outcome record.

use crate::error::JailError;
use crate::report::Report;
use crate::sys;
use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use prims_cgroup::JobCgroup;
use prims_protocol::jail::{CgroupBackend, Enforced, Enforcement, JobSpec, Outcome, Status};
use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

/// How often CPU use is sampled from the cgroup while a job runs, at most.
const CPU_TICK: Duration = Duration::from_millis(50);
/// The longest gap between samples: a live interpreter's lifetime budget is
/// hours of CPU, and sampling it every 50 ms would cost every idle one.
const CPU_TICK_MAX: Duration = Duration::from_secs(30);

/// When to sample next: the job cannot use `left_ns` of CPU sooner than
/// `left_ns / cores` of wall time, so half of that is early enough.
fn cpu_tick(left_ns: u64, cpu_millis: u64) -> Duration {
    let cores = (cpu_millis / 1000).max(1);
    let soonest = Duration::from_nanos(left_ns / cores / 2);
    soonest.clamp(CPU_TICK, CPU_TICK_MAX)
}

pub struct Watch {
    timed_out: Option<&'static str>,
    /// (si_code, si_status) of the init.
    init_status: (i32, i32),
    rusage_cpu_ms: u64,
    rusage_maxrss: u64,
}

fn cpu_ns(cgroup: Option<&dyn JobCgroup>) -> Option<u64> {
    cgroup.and_then(|c| c.usage().ok()).and_then(|u| u.cpu_ns)
}

/// Wait for the init to exit, killing the whole pid namespace at a limit.
pub fn watch(
    spec: &JobSpec,
    pidfd: BorrowedFd<'_>,
    cgroup: Option<&dyn JobCgroup>,
    start: Instant,
) -> Result<Watch, JailError> {
    let wall = Duration::from_millis(spec.limits.wall_time_ms);
    let cpu_limit_ns = spec.limits.cpu_time_ms.saturating_mul(1_000_000);
    let sample_cpu = cpu_ns(cgroup).is_some();
    let mut timed_out = None;
    let mut cpu_left = cpu_limit_ns;
    loop {
        let elapsed = start.elapsed();
        if elapsed >= wall {
            timed_out = Some("wall");
        } else if sample_cpu {
            let used = cpu_ns(cgroup).unwrap_or(0);
            cpu_left = cpu_limit_ns.saturating_sub(used);
            if cpu_left == 0 {
                timed_out = Some("cpu");
            }
        }
        if timed_out.is_some() {
            // Killing pid 1 of the namespace kills every process in it.
            let _ = sys::pidfd_send_signal(pidfd, libc::SIGKILL);
            if let Some(cg) = cgroup {
                let _ = cg.kill();
            }
            break;
        }
        let mut wait = wall - elapsed;
        if sample_cpu {
            wait = wait.min(cpu_tick(cpu_left, spec.limits.cpu_millis));
        }
        let ms = wait.as_millis().clamp(1, i32::MAX as u128) as i32;
        let mut fds = [PollFd::new(pidfd, PollFlags::POLLIN)];
        match poll(
            &mut fds,
            PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(n) if n > 0 => break,
            Ok(_) | Err(Errno::EINTR) => continue,
            Err(e) => return Err(JailError::Wait(e)),
        }
    }
    let init_status = sys::wait_pidfd(pidfd).map_err(JailError::Wait)?;
    let (rusage_cpu_ms, rusage_maxrss) = children_rusage();
    Ok(Watch {
        timed_out,
        init_status,
        rusage_cpu_ms,
        rusage_maxrss,
    })
}

fn children_rusage() -> (u64, u64) {
    // SAFETY: rusage is plain data and getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) } < 0 {
        return (0, 0);
    }
    let ms = |t: libc::timeval| t.tv_sec as u64 * 1000 + t.tv_usec as u64 / 1000;
    (
        ms(ru.ru_utime) + ms(ru.ru_stime),
        ru.ru_maxrss as u64 * 1024,
    )
}

/// What this host enforces each limit with, before any job runs.
fn enforced_base(spec: &JobSpec, cgroup: Option<&dyn JobCgroup>) -> Enforced {
    let by_cgroup = if cgroup.is_some() {
        Enforcement::Cgroup
    } else {
        Enforcement::Rlimit
    };
    Enforced {
        memory: by_cgroup,
        pids: by_cgroup,
        cpu_time: by_cgroup,
        wall_time: Enforcement::Timer,
        landlock: Enforcement::None,
        landlock_abi: 0,
        seccomp: Enforcement::Full,
        cgroup: match (cgroup.is_some(), spec.cgroup.backend) {
            (true, CgroupBackend::V1) => "v1".into(),
            (true, CgroupBackend::V2) => "v2".into(),
            _ => "none".into(),
        },
    }
}

pub fn outcome(
    spec: &JobSpec,
    cgroup: Option<&dyn JobCgroup>,
    watch: Watch,
    reports: Vec<Report>,
    start: Instant,
) -> Outcome {
    let mut out = Outcome {
        wall_ms: start.elapsed().as_millis() as u64,
        enforced: enforced_base(spec, cgroup),
        ..Default::default()
    };
    let usage = cgroup.and_then(|c| c.usage().ok());
    out.cpu_ms = usage
        .as_ref()
        .and_then(|u| u.cpu_ns)
        .map(|ns| ns / 1_000_000)
        .unwrap_or(watch.rusage_cpu_ms);
    out.memory_peak_bytes = usage
        .as_ref()
        .and_then(|u| u.memory_peak_bytes)
        .or(Some(watch.rusage_maxrss).filter(|b| *b > 0));
    out.oom_killed = usage.as_ref().is_some_and(|u| u.oom_kills > 0);

    let mut ended = None;
    for r in reports {
        match r {
            Report::Landlock { enforcement, abi } => {
                out.enforced.landlock = enforcement;
                out.enforced.landlock_abi = abi;
            }
            Report::SetupFailed(e) => {
                out.status = Status::SetupError;
                out.setup_error = Some(e);
                return out;
            }
            Report::Exited(c) => ended = Some((Some(c), None)),
            Report::Signaled(s) => ended = Some((None, Some(s))),
        }
    }
    if let Some(kind) = watch.timed_out {
        out.status = Status::Timeout;
        out.timeout_kind = Some(kind.into());
        out.signal = Some(libc::SIGKILL);
        return out;
    }
    let Some((code, sig)) = ended else {
        // The init died without telling how python ended: only a kill of the
        // init from outside (or an OOM kill of it) does that.
        if out.oom_killed {
            out.status = Status::Oom;
            return out;
        }
        let e = JailError::Child(format!(
            "the jail's init ended unexpectedly (code {}, status {})",
            watch.init_status.0, watch.init_status.1
        ));
        out.status = Status::SetupError;
        out.setup_error = Some(e.to_setup_error());
        return out;
    };
    out.exit_code = code;
    out.signal = sig;
    out.status = match (code, sig) {
        _ if out.oom_killed => Status::Oom,
        (_, Some(libc::SIGXCPU)) => {
            out.timeout_kind = Some("cpu".into());
            Status::Timeout
        }
        (_, Some(_)) => Status::Signal,
        (Some(0), _) => Status::Ok,
        _ => Status::Exit,
    };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_stretch_with_the_budget_left() {
        // A run's 20 s budget nearly spent: the next sample comes at once.
        assert_eq!(cpu_tick(10_000_000, 1000), CPU_TICK);
        // 2 s left on one core: a sample a second from now is early enough.
        assert_eq!(cpu_tick(2_000_000_000, 1000), Duration::from_secs(1));
        // Two cores halve it.
        assert_eq!(cpu_tick(2_000_000_000, 2000), Duration::from_millis(500));
        // A day of budget: no more often than every 30 s.
        assert_eq!(cpu_tick(86_400_000_000_000, 1000), CPU_TICK_MAX);
        // cpu_millis below one core counts as one core (it is slower, not faster).
        assert_eq!(cpu_tick(2_000_000_000, 10), Duration::from_secs(1));
    }
}
