//! One call in a live interpreter: send the cell, follow it to the agent's
//! `done`, enforce the call's time limits (interrupt first, kill after the
//! grace period), and measure it from the cgroup, never from the agent.

use super::agent::CHANNEL_LOST_EXIT;
use super::agent::{OUTPUTS_BYTES_MAX, OUTPUTS_MAX};
use super::channel::{AgentOutput, CellDone, CellStatus, ChannelError, FromAgent, ToAgent};
use super::install::{self, Installer, Served, Serving, MAX_INSTALLS};
use super::live::Live;
use super::output::new_marker;
use super::pumps::{Captured, OutputTx};
use super::settled::{Confirm, Step, MAX_DONES};
use prims_cgroup::{PeakMeter, Usage};
use prims_protocol::jail::{JobLimits, Outcome, Status};
use prims_protocol::wire::{CellOutput, ResetReason};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};
use tokio::time::Instant as TokioInstant;

/// How often CPU use is sampled while a cell runs.
const CPU_TICK: Duration = Duration::from_millis(50);
/// How long after `mark` the end-of-cell markers may take to come through
/// the pipes, or a dead jail's last output.
const MARKER_WAIT: Duration = Duration::from_millis(500);

/// How a call ended, and whether its interpreter lives on.
#[derive(Debug)]
pub(crate) struct CellEnd {
    pub outcome: Outcome,
    pub stdout: Captured,
    pub stderr: Captured,
    pub result: Option<String>,
    pub result_truncated: bool,
    /// Its rich outputs, in order, within the caps of one call.
    pub outputs: Vec<CellOutput>,
    /// Outputs past the caps (the agent's and the supervisor's).
    pub outputs_dropped: u32,
    /// `None`: the interpreter lives on with its state. Otherwise it is
    /// gone, and the next call reports this reason.
    pub gone: Option<ResetReason>,
    /// The caller cancelled the call.
    pub cancelled: bool,
}

enum Ending {
    /// The agent's answer, and which limit interrupted the code, if one did.
    Done(CellDone, Option<&'static str>),
    /// The interrupt at this limit (`wall`, `cpu`) did not stop the code
    /// within the grace period.
    Killed(&'static str),
    Broken(ChannelError),
    /// The channel ended: python is gone.
    Died,
    Cancelled,
}

/// What ends a cell before its code does, besides its limits: the
/// caller's cancel, which kills the interpreter (nobody waits for the
/// result), and the server's stop, which interrupts the cell as a time
/// limit does, so that the interpreter lives on to have its variables
/// saved, and answers the call with status `stopped`.
#[derive(Clone, Copy)]
pub(crate) struct Ends<'a> {
    pub cancel: &'a tokio_util::sync::CancellationToken,
    pub stop: &'a tokio_util::sync::CancellationToken,
}

/// The limit kind of the server's stop.
const STOP: &str = "stop";

/// Runs `code` as the next cell of `live` under `limits`.
pub(crate) async fn run(
    live: &mut Live,
    code: String,
    limits: &JobLimits,
    grace: Duration,
    out: OutputTx,
    ends: Ends<'_>,
    installer: Option<&Installer>,
) -> CellEnd {
    let started = Instant::now();
    let cap = usize::try_from(limits.output_bytes).unwrap_or(usize::MAX);
    live.stdout.begin(cap, out.clone());
    live.stderr.begin(cap, out);
    let peak: Option<PeakMeter> = live.cgroup.as_ref().and_then(|c| c.start_peak().ok());
    let before = usage(live);
    live.cells += 1;
    let id = live.cells;
    let mut seen = Seen::default();
    let mut serving = None;
    let ending = match live.writer.send(&ToAgent::Cell { id, code }).await {
        Err(e) => Ending::Broken(e),
        Ok(()) => {
            let waiting = Waiting {
                id,
                limits,
                grace,
                started,
                cpu_start: before.cpu_ns,
                installer,
                stop: ends.stop,
            };
            follow(live, &waiting, &mut seen, &mut serving, ends.cancel).await
        }
    };
    if let Some(s) = serving.take() {
        // The call ended (cancelled, or the channel did) with an install
        // under way.
        install::abandon(&live.job, s);
    }
    let timed_out = live_timeout(&ending);
    let done = matches!(ending, Ending::Done(..));
    if done {
        mark(live).await;
    }
    let after = usage(live);
    let mut end = CellEnd {
        outcome: Outcome {
            wall_ms: started.elapsed().as_millis() as u64,
            cpu_ms: after
                .cpu_ns
                .zip(before.cpu_ns)
                .map_or(0, |(a, b)| a.saturating_sub(b) / 1_000_000),
            memory_peak_bytes: peak.as_ref().and_then(|p| p.read().ok().flatten()),
            oom_killed: after.oom_kills > before.oom_kills,
            enforced: live.enforced.clone(),
            ..Default::default()
        },
        stdout: Captured::default(),
        stderr: Captured::default(),
        result: None,
        result_truncated: false,
        outputs: seen.outputs.kept,
        outputs_dropped: seen.outputs.dropped,
        gone: None,
        cancelled: false,
    };
    match ending {
        Ending::Done(d, _) => {
            end.outcome.exit_code = d.exit_code;
            end.outcome.status = match d.status {
                _ if timed_out == Some(STOP) => Status::Stopped,
                _ if timed_out.is_some() => Status::Timeout,
                CellStatus::Ok => Status::Ok,
                CellStatus::Error => Status::Error,
                CellStatus::Exit => Status::Exit,
            };
            end.outcome.timeout_kind = timed_out.filter(|k| *k != STOP).map(str::to_string);
            end.result = d.result;
            end.result_truncated = d.result_truncated;
            end.outputs_dropped = end.outputs_dropped.saturating_add(d.outputs_dropped);
        }
        Ending::Killed(STOP) => {
            end.outcome.status = Status::Stopped;
            end.outcome.signal = Some(libc::SIGKILL);
            end.gone = Some(ResetReason::TimedOut);
        }
        Ending::Killed(_) => {
            end.outcome.status = Status::Timeout;
            end.outcome.timeout_kind = timed_out.map(str::to_string);
            end.outcome.signal = Some(libc::SIGKILL);
            end.gone = Some(ResetReason::TimedOut);
        }
        Ending::Broken(e) => {
            live.kill();
            tracing::warn!(job = %live.job, error = %e, "an interpreter's channel broke; killed it");
            end.outcome.status = Status::Error;
            end.gone = Some(ResetReason::ChannelBroken);
            note(
                &mut end,
                format!(
                    "\n[prims] The interpreter's channel to the server was broken ({e}); \
                 the interpreter was stopped and the next call starts a new one.\n"
                ),
            );
        }
        Ending::Died => {
            died(live, &mut end, limits, started, before.cpu_ns).await;
            // Code that replaced python (exec) ran on until now.
            end.outcome.wall_ms = started.elapsed().as_millis() as u64;
        }
        Ending::Cancelled => {
            live.kill();
            end.cancelled = true;
            end.gone = Some(ResetReason::Cancelled);
        }
    }
    if seen.install_cut && end.outcome.status == Status::Timeout {
        let limit = match end.outcome.timeout_kind.as_deref() {
            Some("cpu") => "CPU time",
            _ => "wall time",
        };
        let how = if end.outcome.signal == Some(libc::SIGKILL) {
            "killed (it did not stop at the interrupt)"
        } else {
            "interrupted"
        };
        note(
            &mut end,
            format!(
                "\n[prims] The call's {limit} limit ran out during a `%pip install`, whose time \
                 counts against the call: the cell stopped waiting for the install and was \
                 {how}. Give a call that installs large packages a longer timeout.\n"
            ),
        );
    }
    if end.outcome.status == Status::Stopped {
        let killed = end.gone.is_some();
        note(&mut end, stopped_note(killed));
    }
    if end.outcome.oom_killed && end.gone.is_none() && end.outcome.status != Status::Timeout {
        // A child of the code was killed for memory; the interpreter lives.
        end.outcome.status = Status::Oom;
    }
    if !done {
        // The jail is dead or being killed: what it wrote up to then is
        // still on its way through the pipes, which end with it.
        let drained = TokioInstant::now() + MARKER_WAIT;
        live.stdout.wait_marker(drained).await;
        live.stderr.wait_marker(drained).await;
    }
    end.stdout = live.stdout.end();
    // The server's notes follow the code's own stderr.
    let notes = std::mem::replace(&mut end.stderr, live.stderr.end());
    end.stderr.bytes.extend_from_slice(&notes.bytes);
    end
}

/// The cell's code is over (its `done` confirmed): only now is its marker
/// made, and the agent told to end the output with it. Code of the cell
/// never held it, so none of its output can pass for the end.
async fn mark(live: &mut Live) {
    let marker = new_marker();
    live.stdout.expect(&marker);
    live.stderr.expect(&marker);
    if let Err(e) = live.writer.send(&ToAgent::Mark { marker }).await {
        // The channel broke just now: the next call finds it so. What came
        // through the pipes is this cell's.
        tracing::debug!(job = %live.job, error = %e, "no mark for a cell's output");
        return;
    }
    let deadline = TokioInstant::now() + MARKER_WAIT;
    live.stdout.wait_marker(deadline).await;
    live.stderr.wait_marker(deadline).await;
}

/// Appends a note from the server to the call's stderr.
fn note(end: &mut CellEnd, text: String) {
    end.stderr.bytes.extend_from_slice(text.as_bytes());
}

/// What a call the server's stop ended says on its stderr.
fn stopped_note(killed: bool) -> String {
    let how = if killed {
        "did not stop at the interrupt and was killed, so the session's next interpreter \
         starts from the variables saved before this call"
    } else {
        "was interrupted; its interpreter's variables are saved with the session"
    };
    format!(
        "\n[prims] The server is stopping: this cell {how}. The session, its files and \
         variables are there again after the server's next start.\n"
    )
}

fn live_timeout(e: &Ending) -> Option<&'static str> {
    match e {
        Ending::Done(_, kind) => *kind,
        Ending::Killed(kind) => Some(*kind),
        _ => None,
    }
}

/// The CPU samples of a running cell: the first one `CPU_TICK` in, not at
/// once, which would read every counter twice for a short cell.
fn cpu_ticks() -> tokio::time::Interval {
    tokio::time::interval_at(TokioInstant::now() + CPU_TICK, CPU_TICK)
}

fn usage(live: &Live) -> Usage {
    live.cgroup
        .as_ref()
        .and_then(|c| c.usage().ok())
        .unwrap_or_default()
}

/// Waits for the cell's `done`, interrupting at the time limits. A `done`
/// counts once python's main thread is back where the agent waits for the
/// next cell ([`Confirm`]): one the cell's code forged while it runs on is
/// held until then.
///
/// A `%pip install` the cell asks for is served here too, beside the wall
/// timer and the CPU samples: its time counts against the call's wall
/// limit, and the cell's CPU keeps being watched while it runs (the
/// install jail's own CPU is its cgroup's, not the cell's). So `timeout_s`
/// bounds the whole call, installs included, and a slot is never held past
/// it; giving install time back would let eight installs a cell, each
/// bounded only by `python.build_timeout`, hold a run slot for 80 minutes.
async fn follow<'a>(
    live: &mut Live,
    w: &Waiting<'a>,
    seen: &mut Seen,
    serving: &mut Option<Serving<'a>>,
    cancel: &tokio_util::sync::CancellationToken,
) -> Ending {
    let (id, limits, grace, started, cpu_start) = (w.id, w.limits, w.grace, w.started, w.cpu_start);
    let wall = TokioInstant::from_std(started) + Duration::from_millis(limits.wall_time_ms);
    let mut installs = 0u32;
    let cpu_limit_ns = limits.cpu_time_ms.saturating_mul(1_000_000);
    let sample_cpu = cpu_start.is_some();
    let mut tick = cpu_ticks();
    let mut interrupted: Option<(&'static str, TokioInstant)> = None;
    // A SIGINT must not land while the agent reads a frame of ours: it
    // would leave the rest of the frame for the agent's next read, which
    // then breaks the channel. An interrupt due then is held until the
    // agent is seen to have read everything (`read_everything`), or until
    // this instant.
    let mut held: Option<TokioInstant> = None;
    // When the agent was last sent an install's answer.
    let mut answered: Option<TokioInstant> = None;
    let mut resend_at = wall;
    let mut confirm = Confirm::default();
    loop {
        let kill_at = interrupted.map(|(_, at)| at);
        // While an install runs the agent's main thread waits on the
        // channel for its answer, where `Confirm` would take it for the end
        // of the cell: nothing from the agent is read until it has one.
        let installing = serving.is_some();
        let next = tokio::select! {
            m = live.rx.recv(), if !installing => match m {
                Some(Ok(FromAgent::Done(d))) if d.id == id => {
                    Next::Step(confirm.done(&live.main, d).await)
                }
                Some(Ok(FromAgent::Output(o))) if o.id == id => {
                    seen.outputs.take(o);
                    Next::Step(Step::Wait)
                }
                Some(Ok(FromAgent::Install { id: asker, requirements })) if asker == id => {
                    installs += 1;
                    if installs > MAX_INSTALLS {
                        return Ending::Broken(ChannelError::Malformed(format!(
                            "over {MAX_INSTALLS} installs in cell {id}"
                        )));
                    }
                    if interrupted.is_none() {
                        match install::start(&live.job, w.installer, requirements) {
                            Ok(s) => *serving = Some(s),
                            Err(answer) => {
                                if let Err(e) = install::tell(live, answer).await {
                                    return Ending::Broken(e);
                                }
                                answered = Some(TokioInstant::now());
                            }
                        }
                    }
                    // Past a limit no install starts and none is answered:
                    // the agent waits on the channel with nothing to read,
                    // where the interrupt, sent again, ends its wait.
                    Next::Step(Step::Wait)
                }
                Some(Ok(FromAgent::Synced { nonce })) => match confirm.synced(&nonce) {
                    Some(step) => Next::Step(step),
                    None => return Ending::Broken(ChannelError::Malformed(
                        "a sync answer that was not asked for".into(),
                    )),
                },
                Some(Ok(other)) => return Ending::Broken(ChannelError::Malformed(
                    format!("expected done for cell {id}, got {}", other.op()),
                )),
                Some(Err(ChannelError::Closed)) | None => return Ending::Died,
                Some(Err(e)) => return Ending::Broken(e),
            },
            served = next_served(serving), if installing => {
                let sent = match served {
                    Served::Line(line) => install::progress(live, line).await,
                    Served::Ended(last, answer) => {
                        *serving = None;
                        let mut sent = Ok(());
                        for line in last {
                            sent = install::progress(live, line).await;
                            if sent.is_err() {
                                break;
                            }
                        }
                        answered = Some(TokioInstant::now());
                        match sent {
                            Ok(()) => install::tell(live, answer).await,
                            Err(e) => Err(e),
                        }
                    }
                };
                if let Err(e) = sent {
                    return Ending::Broken(e);
                }
                Next::Step(Step::Wait)
            }
            _ = tokio::time::sleep_until(confirm.recheck.unwrap_or(wall)),
                if confirm.recheck.is_some() && !installing =>
            {
                Next::Step(confirm.again(&live.main))
            }
            _ = tokio::time::sleep_until(wall), if interrupted.is_none() => Next::Limit("wall"),
            _ = w.stop.cancelled(), if interrupted.is_none() => Next::Limit(STOP),
            _ = tick.tick(), if sample_cpu && interrupted.is_none() => {
                let used = usage(live).cpu_ns.zip(cpu_start).map(|(a, b)| a.saturating_sub(b));
                if used.is_some_and(|ns| ns >= cpu_limit_ns) {
                    Next::Limit("cpu")
                } else {
                    Next::Step(Step::Wait)
                }
            }
            // A SIGINT that lands after python's last signal check but before
            // it blocks (time.sleep, a read) waits out that call: send again.
            _ = tokio::time::sleep_until(resend_at), if interrupted.is_some() => {
                let now = TokioInstant::now();
                if held.is_some_and(|until| now < until && !read_everything(live)) {
                    resend_at = now + LOOK_AGAIN;
                } else {
                    held = None;
                    interrupt(live, grace);
                    resend_at = now + INTERRUPT_AGAIN;
                }
                Next::Step(Step::Wait)
            }
            _ = tokio::time::sleep_until(kill_at.unwrap_or(wall)), if kill_at.is_some() => {
                live.kill();
                return Ending::Killed(interrupted.map_or("wall", |(kind, _)| kind));
            }
            // A call the server's stop cancelled is ended by the stop's own
            // interrupt above, so that its interpreter lives to be saved.
            // Both may turn ready in one wait (the stop cancels the call):
            // whichever this select picks, the stop wins.
            _ = cancel.cancelled(), if !w.stop.is_cancelled() => {
                if !w.stop.is_cancelled() {
                    return Ending::Cancelled;
                }
                if interrupted.is_none() { Next::Limit(STOP) } else { Next::Step(Step::Wait) }
            }
        };
        let step = match next {
            Next::Step(step) => step,
            Next::Limit(kind) => {
                let now = TokioInstant::now();
                interrupted = Some((kind, now + grace));
                if let Some(s) = serving.take() {
                    // Nothing more of the install reaches the agent, which
                    // waits on the channel for its answer, where a SIGINT
                    // ends the wait with a KeyboardInterrupt, as at any
                    // limit. Progress lines may still be on their way to
                    // it: the interrupt waits until the agent has read them
                    // (at worst until the grace is over, and the kill).
                    install::abandon(&live.job, s);
                    seen.install_cut = true;
                    held = Some(now + grace);
                } else if let Some(settled) = answered
                    .map(|at| at + ANSWER_READ)
                    .filter(|settled| now < *settled)
                {
                    // The agent may still be reading the answer just sent.
                    // Once it has, it runs the cell's code, where nothing
                    // shows from outside that it is done with the channel:
                    // the interrupt waits a while, which a woken agent
                    // needs even when its cgroup's CPU quota has run out.
                    held = Some(settled);
                }
                if held.is_some() {
                    resend_at = now;
                } else {
                    interrupt(live, grace);
                    resend_at = now + INTERRUPT_AGAIN;
                }
                Step::Wait
            }
        };
        match step {
            Step::Wait => {}
            Step::Ended(d) => return Ending::Done(d, interrupted.map(|(kind, _)| kind)),
            Step::Send(msg) => {
                if let Err(e) = live.writer.send(&msg).await {
                    return Ending::Broken(e);
                }
            }
            Step::TooMany => {
                return Ending::Broken(ChannelError::Malformed(format!(
                    "over {MAX_DONES} done messages for cell {id}"
                )))
            }
        }
    }
}

/// What one turn of `follow` saw.
enum Next {
    Step(Step),
    /// The call's `wall` or `cpu` limit ran out.
    Limit(&'static str),
}

/// The next word of the install under way; never ready without one.
async fn next_served(serving: &mut Option<Serving<'_>>) -> Served {
    match serving {
        Some(s) => s.next().await,
        None => std::future::pending().await,
    }
}

/// Whether the agent has read every frame sent to it: python's main thread
/// sleeps in read(2) on the channel, which it does only with nothing left
/// to read (a thread that data woke shows in `/proc` as running until it
/// blocks again), and the supervisor sends nothing meanwhile. When python
/// cannot be seen (it is gone), the interrupt goes as it would anyway.
fn read_everything(live: &Live) -> bool {
    live.main.awaits_cell().unwrap_or(true)
}

/// What `follow` waits for: the cell, its limits, and when it started.
struct Waiting<'a> {
    id: u64,
    limits: &'a JobLimits,
    grace: Duration,
    started: Instant,
    cpu_start: Option<u64>,
    installer: Option<&'a Installer>,
    /// The server's stop: a limit like the wall time's.
    stop: &'a tokio_util::sync::CancellationToken,
}

/// What a cell showed besides its end.
#[derive(Default)]
struct Seen {
    outputs: Outputs,
    /// A limit ran out while an install the cell asked for was running.
    install_cut: bool,
}

/// A cell's outputs as they arrive, within the caps of one call whatever
/// the agent (or code posing as it) sends.
#[derive(Default)]
struct Outputs {
    kept: Vec<CellOutput>,
    bytes: usize,
    dropped: u32,
}

impl Outputs {
    fn take(&mut self, o: AgentOutput) {
        let size = o.bytes();
        if self.kept.len() >= OUTPUTS_MAX || self.bytes + size > OUTPUTS_BYTES_MAX {
            self.dropped = self.dropped.saturating_add(1);
            return;
        }
        self.bytes += size;
        self.kept.push(o.into_output());
    }
}

/// How long an interrupt goes unanswered before it is sent again.
const INTERRUPT_AGAIN: Duration = Duration::from_millis(200);
/// How often a held interrupt looks whether the agent has read everything.
const LOOK_AGAIN: Duration = Duration::from_millis(5);
/// How long after an install's answer an interrupt is held, for the agent
/// to read the answer: more than a CPU-quota period (100 ms) of a throttled
/// cgroup, in which a woken agent may wait for a core.
const ANSWER_READ: Duration = Duration::from_millis(250);

/// Sends python SIGINT (KeyboardInterrupt); returns when to give up on it.
fn interrupt(live: &Live, grace: Duration) -> TokioInstant {
    if let Err(e) = crate::job::send_sigint(live.python.as_fd()) {
        tracing::warn!(job = %live.job, error = %e, "could not interrupt an interpreter");
    }
    TokioInstant::now() + grace
}

/// The agent's channel ended during the cell: python died, or the code
/// replaced it (`os.execv`) and runs on. The jailer's outcome says how the
/// jail ended; until it does, the call's time limits still hold.
async fn died(
    live: &mut Live,
    end: &mut CellEnd,
    limits: &JobLimits,
    started: Instant,
    cpu_start: Option<u64>,
) {
    let outcome = match until_exit_or_limit(live, limits, started, cpu_start).await {
        Err(kind) => {
            live.kill();
            end.outcome.status = Status::Timeout;
            end.outcome.timeout_kind = Some(kind.to_string());
            end.outcome.signal = Some(libc::SIGKILL);
            end.gone = Some(ResetReason::TimedOut);
            return;
        }
        Ok(o) => o,
    };
    let Some(o) = outcome else {
        live.kill();
        end.outcome.status = Status::Signal;
        end.gone = Some(ResetReason::CodeExited);
        return;
    };
    end.outcome.exit_code = o.exit_code;
    end.outcome.signal = o.signal;
    end.outcome.oom_killed |= o.oom_killed;
    let (status, reason) = match o.status {
        _ if end.outcome.oom_killed => (Status::Oom, ResetReason::OutOfMemory),
        Status::Oom => (Status::Oom, ResetReason::OutOfMemory),
        Status::Timeout => (Status::Timeout, ResetReason::TimedOut),
        Status::Exit if o.exit_code == Some(CHANNEL_LOST_EXIT) => {
            note(
                end,
                "\n[prims] The interpreter's channel to the server was broken (the code closed \
                 or replaced it), which ended the interpreter; the next call starts a new one.\n"
                    .to_string(),
            );
            (Status::Error, ResetReason::ChannelBroken)
        }
        Status::Ok | Status::Exit | Status::Error => (
            if o.exit_code == Some(0) {
                Status::Ok
            } else {
                Status::Exit
            },
            ResetReason::CodeExited,
        ),
        // A jail's own outcome is never `stopped`.
        Status::Signal | Status::SetupError | Status::Stopped => {
            (Status::Signal, ResetReason::CodeExited)
        }
    };
    if reason == ResetReason::ChannelBroken {
        // The agent's code, not the code's.
        end.outcome.exit_code = None;
    }
    end.outcome.status = status;
    end.gone = Some(reason);
}

/// The jailer's outcome (`None` if it vanished), or the limit (`wall`,
/// `cpu`) that ran out first.
async fn until_exit_or_limit(
    live: &mut Live,
    limits: &JobLimits,
    started: Instant,
    cpu_start: Option<u64>,
) -> Result<Option<Outcome>, &'static str> {
    let wall = TokioInstant::from_std(started) + Duration::from_millis(limits.wall_time_ms);
    let cpu_limit_ns = limits.cpu_time_ms.saturating_mul(1_000_000);
    let mut tick = cpu_ticks();
    loop {
        tokio::select! {
            biased;
            o = &mut live.exit => return Ok(o.ok()),
            _ = tokio::time::sleep_until(wall) => return Err("wall"),
            _ = tick.tick(), if cpu_start.is_some() => {
                let used = usage(live).cpu_ns.zip(cpu_start).map(|(a, b)| a.saturating_sub(b));
                if used.is_some_and(|ns| ns >= cpu_limit_ns) {
                    return Err("cpu");
                }
            }
        }
    }
}
