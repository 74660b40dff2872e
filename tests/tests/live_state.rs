//! One session's live interpreter through the supervisor socket: state
//! kept between calls, the last expression's value, exceptions and exits,
//! `fresh`, a change of requirements, time and memory limits, output of
//! subprocesses, an stdout flood, background processes and a long cell.

use prims_protocol::jail::{LimitRequest, Status};
use prims_protocol::wire::{InterpreterState, ResetReason};
use prims_tests::daemon::{run_req, Daemon};
use prims_tests::live::*;
use prims_tests::{assert_no_survivors, processes_with_marker, py_str, unique};
use std::collections::BTreeSet;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// No pool (every interpreter starts cold) and a short interrupt grace, so
/// an interpreter that ignores the interrupt is killed soon.
fn policy(extra: &str) -> String {
    live_policy(&format!("{NO_POOL}interrupt_grace = \"500ms\""), extra)
}

async fn session(extra: &str) -> (Daemon, prims_protocol::client::Client, String) {
    let d = Daemon::start(&policy(extra));
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap().session_id;
    (d, c, s)
}

#[tokio::test(flavor = "multi_thread")]
async fn live_state_variables_imports_and_functions_persist() {
    let (_d, c, s) = session("").await;
    let first = run(&c, &s, "x = 41").await;
    assert_state(&first, InterpreterState::New, Some(ResetReason::FirstCall));
    assert!(!first.interpreter.warm, "no pool: a cold start");
    assert_eq!(first.outcome.status, Status::Ok);
    assert_eq!(first.outcome.exit_code, Some(0));
    assert_eq!(stdout(&first), "");

    let second = run(&c, &s, "print(x + 1)").await;
    assert_kept(&second);
    assert_eq!(stdout(&second), "42\n");
    assert_eq!(second.interpreter.result, None);

    let def = run(&c, &s, "import json\ndef twice(v):\n    return v * 2").await;
    assert_kept(&def);
    let used = run(&c, &s, "print(twice(json.loads('21')))").await;
    assert_kept(&used);
    assert_eq!(stdout(&used), "42\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn live_state_last_expression_is_the_result() {
    let (_d, c, s) = session("").await;
    let set = run(&c, &s, "x = 41").await;
    assert_eq!(set.interpreter.result, None, "an assignment has no value");

    let expr = run(&c, &s, "x + 1").await;
    assert_kept(&expr);
    assert_eq!(expr.interpreter.result.as_deref(), Some("42"));
    assert!(!expr.interpreter.result_truncated);
    assert_eq!(stdout(&expr), "", "the value is the result, not output");

    let printed = run(&c, &s, "print('p')\n{'k': [x]}").await;
    assert_eq!(stdout(&printed), "p\n");
    assert_eq!(printed.interpreter.result.as_deref(), Some("{'k': [41]}"));

    let none = run(&c, &s, "None").await;
    assert_eq!(none.interpreter.result, None, "None shows nothing");
    let call = run(&c, &s, "print('side')").await;
    assert_eq!(call.interpreter.result, None, "print() returns None");

    let big = run(&c, &s, "'a' * 100_000").await;
    let result = big.interpreter.result.clone().unwrap_or_default();
    assert!(big.interpreter.result_truncated, "{:?}", big.interpreter);
    assert_eq!(
        result.chars().count(),
        16384,
        "the repr is cut at 16384 chars"
    );
    assert!(result.starts_with("'aaaa") && result.bytes().skip(1).all(|b| b == b'a'));
    assert_eq!(stdout(&big), "");
}

#[tokio::test(flavor = "multi_thread")]
async fn live_state_an_exception_fails_the_call_and_keeps_the_state() {
    let (_d, c, s) = session("").await;
    run(&c, &s, "x = 1").await;
    let failed = run(&c, &s, "y = 2\n1 / 0\nz = 3").await;
    assert_kept(&failed);
    assert_eq!(failed.outcome.status, Status::Error);
    assert_eq!(failed.outcome.exit_code, Some(1));
    assert_eq!(failed.outcome.signal, None);
    let err = stderr(&failed);
    // IPython's traceback, as a notebook shows it: it names the cell.
    assert!(
        err.contains("Traceback (most recent call last)\nCell In[2], line 2\n"),
        "{err}"
    );
    assert_stderr_ends_with(&failed, "ZeroDivisionError: division by zero\n");
    assert!(
        !err.contains("File \"<string>\""),
        "no frame of the agent: {err}"
    );
    assert_eq!(stdout(&failed), "");

    let after = run(&c, &s, "print(x, y, 'z' in globals())").await;
    assert_kept(&after);
    assert_eq!(after.outcome.status, Status::Ok);
    assert_eq!(
        stdout(&after),
        "1 2 False\n",
        "what ran before the exception stays"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn live_state_fresh_drops_the_state() {
    let (_d, c, s) = session("").await;
    run(&c, &s, "x = 1").await;
    let fresh_run = send(&c, fresh(&s, "print(x)")).await;
    assert_reset(&fresh_run, ResetReason::FreshRequested);
    assert_eq!(fresh_run.outcome.status, Status::Error);
    assert_stderr_ends_with(&fresh_run, "NameError: name 'x' is not defined\n");
    let next = run(&c, &s, "print('again')").await;
    assert_kept(&next);
    assert_eq!(stdout(&next), "again\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn live_state_requirements_accumulate_and_keep_the_state() {
    let (_d, c, s) = session("").await;
    let first = send(&c, requiring(&s, "import six\nx = 1", &["six==1.16.0"])).await;
    assert_eq!(first.outcome.status, Status::Ok, "{}", stderr(&first));
    // Left out: the session keeps its packages and its interpreter.
    let without = run(&c, &s, "print(x, six.__version__)").await;
    assert_kept(&without);
    assert_eq!(stdout(&without), "1 1.16.0\n");
    // Added: installed into the session, only what it lacks (six stays).
    let added = send(
        &c,
        requiring(
            &s,
            "import dateutil, six\nprint(x, dateutil.__name__, six.__version__)",
            &["python-dateutil==2.9.0.post0"],
        ),
    )
    .await;
    assert_kept(&added);
    assert_eq!(stdout(&added), "1 dateutil 1.16.0\n", "{}", stderr(&added));
    assert_eq!(
        added.interpreter.installed,
        ["python_dateutil==2.9.0.post0"],
        "six was there already"
    );
    let site = run(
        &c,
        &s,
        "import os\nprint(sorted(os.listdir('/workspace/.prims/site-packages')))",
    )
    .await;
    assert!(
        stdout(&site).contains("'dateutil'") && !stdout(&site).contains("six"),
        "{}",
        stdout(&site)
    );
    // A subset of what it has: nothing to do.
    let subset = send(&c, requiring(&s, "print(x)", &["six==1.16.0"])).await;
    assert_kept(&subset);
    assert!(subset.interpreter.installed.is_empty());
    // Another version of an imported package: only a new environment.
    let conflict = send(
        &c,
        requiring(
            &s,
            "import six, dateutil\nprint(six.__version__, 'x' in globals())",
            &["six==1.17.0"],
        ),
    )
    .await;
    assert_reset(&conflict, ResetReason::RequirementsConflict);
    assert_eq!(stdout(&conflict), "1.17.0 False\n", "{}", stderr(&conflict));
    let words = conflict.interpreter.reason_message.as_deref().unwrap_or("");
    assert!(
        words.contains("six==1.17.0") && words.contains("1.16.0"),
        "names the package and both versions: {words}"
    );
    let after = run(&c, &s, "print(six.__version__)").await;
    assert_kept(&after);
    assert_eq!(stdout(&after), "1.17.0\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn live_state_pip_in_a_cell_installs_into_the_session_and_keeps_the_state() {
    let (_d, c, s) = session("").await;
    run(&c, &s, "x = 1").await;
    // The cell itself has no network; %pip goes through the install jail.
    let code = "%pip install idna\n\
        import idna, socket\n\
        try:\n\
        \x20   socket.create_connection(('pypi.org', 443), timeout=3)\n\
        except OSError as e:\n\
        \x20   print('no network:', type(e).__name__)\n\
        print(x, idna.__name__)";
    let pip = run(&c, &s, code).await;
    assert_kept(&pip);
    assert_eq!(pip.outcome.status, Status::Ok, "{}", stderr(&pip));
    let out = stdout(&pip);
    assert!(out.contains("+ idna=="), "uv's progress in the cell: {out}");
    assert!(out.contains("Successfully installed idna-"), "{out}");
    assert!(out.ends_with("1 idna\n"), "{out}");
    assert!(out.contains("no network:"), "{out}");
    // `!pip install` is the same; the session has it now.
    let again = run(
        &c,
        &s,
        "!pip install -q idna six==1.16.0\nimport six\nprint(six.__version__)",
    )
    .await;
    assert_kept(&again);
    assert!(stdout(&again).ends_with("1.16.0\n"), "{}", stdout(&again));
    // A version other than the one it has: told what to do, state kept.
    let conflict = run(&c, &s, "%pip install six==1.17.0\nprint(x)").await;
    assert_kept(&conflict);
    assert!(
        stderr(&conflict)
            .contains("ERROR: six==1.17.0 asks for another version of six than the 1.16.0"),
        "{}",
        stderr(&conflict)
    );
    assert_eq!(stdout(&conflict).lines().last(), Some("1"));
    // What %pip installed is the session's: a call that repeats it keeps.
    let repeat = send(&c, requiring(&s, "print(x)", &["idna", "six==1.16.0"])).await;
    assert_kept(&repeat);
    assert!(repeat.interpreter.installed.is_empty(), "{repeat:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn live_state_a_session_install_is_invisible_to_another_session() {
    let (_d, c, a) = session("").await;
    let b = c.open_session(None).await.unwrap().session_id;
    run(&c, &a, "x = 1").await;
    run(&c, &b, "y = 1").await;
    let added = send(&c, requiring(&a, "import idna\nprint(x)", &["idna"])).await;
    assert_kept(&added);
    assert_eq!(stdout(&added), "1\n", "{}", stderr(&added));
    let other = run(&c, &b, "import idna").await;
    assert_kept(&other);
    assert_stderr_ends_with(&other, "ModuleNotFoundError: No module named 'idna'\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn live_state_sys_exit_keeps_the_interpreter_and_os_exit_ends_it() {
    let (_d, c, s) = session("").await;
    run(&c, &s, "x = 'kept'").await;

    let exit3 = run(&c, &s, "import sys\nprint('before')\nsys.exit(3)").await;
    assert_kept(&exit3);
    assert_eq!(exit3.outcome.status, Status::Exit);
    assert_eq!(exit3.outcome.exit_code, Some(3));
    assert_eq!(stdout(&exit3), "before\n");

    let caught = run(
        &c,
        &s,
        "try:\n    sys.exit(1)\nexcept SystemExit:\n    pass\nprint(x)",
    )
    .await;
    assert_kept(&caught);
    assert_eq!(caught.outcome.status, Status::Ok);
    assert_eq!(caught.outcome.exit_code, Some(0));
    assert_eq!(stdout(&caught), "kept\n", "sys.exit(3) kept the state");

    let (gone, streamed) = send_streamed(
        &c,
        run_req(&s, "import os\nprint('bye', flush=True)\nos._exit(7)"),
    )
    .await;
    assert_kept(&gone);
    assert_eq!(gone.outcome.status, Status::Exit);
    assert_eq!(gone.outcome.exit_code, Some(7));
    assert_eq!(gone.outcome.signal, None);
    assert_eq!(streamed, b"bye\n", "streamed as it was printed");
    assert_eq!(
        stdout(&gone),
        "bye\n",
        "the reply keeps what the code printed before it ended the interpreter"
    );

    let next = run(&c, &s, "print('x' in globals())").await;
    assert_reset(&next, ResetReason::CodeExited);
    assert_eq!(next.outcome.status, Status::Ok);
    assert_eq!(stdout(&next), "False\n", "a new interpreter, fresh state");
}

/// Runs `code` under the limit `set` makes after setting `x`: the limit
/// interrupts it (KeyboardInterrupt, no kill) as a `kind` timeout, and the
/// next call finds `x`.
async fn interrupted_keeps_state(code: &str, kind: &str, set: impl FnOnce(&mut LimitRequest)) {
    let (_d, c, s) = session("").await;
    run(&c, &s, "x = 'kept'").await;
    let cut = send(&c, limited(&s, code, set)).await;
    assert_kept(&cut);
    assert_eq!(cut.outcome.status, Status::Timeout, "{cut:?}");
    assert_eq!(cut.outcome.timeout_kind.as_deref(), Some(kind));
    assert_eq!(cut.outcome.signal, None, "interrupted, not killed");
    assert_stderr_ends_with(&cut, "KeyboardInterrupt: \n");
    let after = run(&c, &s, "print(x)").await;
    assert_kept(&after);
    assert_eq!(stdout(&after), "kept\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn live_state_a_wall_time_limit_interrupts_the_code_and_keeps_the_state() {
    interrupted_keeps_state("import time\ntime.sleep(60)", "wall", |l| {
        l.wall_time_ms = Some(1000)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn live_state_a_cpu_limit_interrupts_the_code_and_keeps_the_state() {
    interrupted_keeps_state("while True:\n    pass", "cpu", |l| {
        l.cpu_time_ms = Some(1000)
    })
    .await;
}

/// An interrupt can land after python's last signal check and before it
/// blocks in a syscall, where it waits out the call: unanswered, it is sent
/// again within the grace. A handler that lets only the second one through
/// stands in for the lost first.
#[tokio::test(flavor = "multi_thread")]
async fn live_state_an_unanswered_interrupt_is_sent_again_within_the_grace() {
    let code = "import signal, time\nseen = []\n\
                def second(*a):\n    seen.append(1)\n    if len(seen) > 1:\n        raise KeyboardInterrupt\n\
                signal.signal(signal.SIGINT, second)\ntime.sleep(60)";
    interrupted_keeps_state(code, "wall", |l| l.wall_time_ms = Some(1000)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn live_state_code_that_swallows_the_interrupt_is_killed() {
    let (_d, c, s) = session("").await;
    run(&c, &s, "x = 'lost'").await;
    let code = "import signal\nsignal.signal(signal.SIGINT, lambda *a: None)\n\
                print('spinning', flush=True)\nwhile True:\n    pass";
    let (stuck, streamed) =
        send_streamed(&c, limited(&s, code, |l| l.wall_time_ms = Some(1000))).await;
    assert_kept(&stuck);
    assert_eq!(stuck.outcome.status, Status::Timeout, "{stuck:?}");
    assert_eq!(stuck.outcome.timeout_kind.as_deref(), Some("wall"));
    assert_eq!(stuck.outcome.signal, Some(libc::SIGKILL));
    assert_eq!(streamed, b"spinning\n");
    assert_eq!(
        stdout(&stuck),
        "spinning\n",
        "the reply keeps what the code printed before it was killed"
    );

    let next = run(&c, &s, "print('x' in globals())").await;
    assert_reset(&next, ResetReason::TimedOut);
    assert_eq!(stdout(&next), "False\n");
    let again = run(&c, &s, "print('fine')").await;
    assert_kept(&again);
    assert_eq!(stdout(&again), "fine\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn live_state_out_of_memory_resets_and_the_session_works() {
    let (_d, c, s) = session("[limits]\nmemory = \"256MiB\"\n").await;
    run(&c, &s, "x = 1").await;
    // A child that runs out of memory is killed alone: the interpreter lives.
    let child = run(
        &c,
        &s,
        "import subprocess, sys\n\
         r = subprocess.run([sys.executable, '-c', \"b = b'x' * (512 << 20)\"])\n\
         print(r.returncode)",
    )
    .await;
    assert_kept(&child);
    assert_eq!(child.outcome.status, Status::Oom, "{child:?}");
    assert!(child.outcome.oom_killed);
    assert_eq!(stdout(&child), "-9\n");
    let still = run(&c, &s, "print(x)").await;
    assert_kept(&still);
    assert_eq!(stdout(&still), "1\n");

    let hog = run(&c, &s, "b = b'x' * (512 << 20)\nprint('survived')").await;
    assert_kept(&hog);
    assert_eq!(hog.outcome.status, Status::Oom, "{hog:?}");
    assert!(hog.outcome.oom_killed);
    assert_eq!(stdout(&hog), "");

    let next = run(&c, &s, "print('x' in globals())").await;
    assert_reset(&next, ResetReason::OutOfMemory);
    assert_eq!(next.outcome.status, Status::Ok);
    assert_eq!(stdout(&next), "False\n");
    let works = run(&c, &s, "print(sum(range(10)))").await;
    assert_kept(&works);
    assert_eq!(stdout(&works), "45\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn live_state_output_of_subprocesses_is_in_the_call() {
    let (_d, c, s) = session("").await;
    let r = run(
        &c,
        &s,
        "import os, subprocess, sys\n\
         print('a')\n\
         os.system('echo sub')\n\
         subprocess.run(['echo', 'x'])\n\
         os.system('echo e >&2')\n\
         print('b')\n\
         print('c', file=sys.stderr)",
    )
    .await;
    assert_eq!(r.outcome.status, Status::Ok, "{r:?}");
    assert_eq!(stdout(&r), "a\nsub\nx\nb\n");
    assert_eq!(stderr(&r), "e\nc\n");
    let next = run(&c, &s, "subprocess.run(['echo', 'y'])").await;
    assert_eq!(stdout(&next), "y\n", "nothing of the last call");
    assert_eq!(
        next.interpreter.result.as_deref(),
        Some("CompletedProcess(args=['echo', 'y'], returncode=0)")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn live_state_an_stdout_flood_is_cut_and_the_next_call_is_clean() {
    // A grace long enough that the interrupt gets through the flood on a
    // loaded host: what is checked is the cut, not how fast it stops.
    let d = Daemon::start(&live_policy(
        &format!("{NO_POOL}interrupt_grace = \"10s\""),
        "",
    ));
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap().session_id;
    let cap = 64 * 1024;
    let flood = send(
        &c,
        limited(&s, "while True:\n    print('x' * 1000)", |l| {
            l.wall_time_ms = Some(1000);
            l.output_bytes = Some(cap);
        }),
    )
    .await;
    assert_eq!(flood.outcome.status, Status::Timeout, "{:?}", flood.outcome);
    assert!(flood.stdout_truncated);
    assert_eq!(flood.stdout.len() as u64, cap);
    assert!(flood.stdout.iter().all(|&b| b == b'x' || b == b'\n'));

    let next = run(&c, &s, "print('after')").await;
    assert_kept(&next);
    assert_eq!(next.outcome.status, Status::Ok);
    assert_eq!(stdout(&next), "after\n", "no byte of the flood");
    assert!(!next.stdout_truncated);
    assert_eq!(stderr(&next), "");
}

/// How many more processes the jail can start: the probe starts sleepers
/// until fork fails, then kills them; prints the count and the errno.
const SPARE_PIDS: &str = r#"import errno, subprocess
more = []
try:
    while len(more) < 100:
        more.append(subprocess.Popen(['sleep', '300']))
    print(len(more), 'no limit')
except OSError as e:
    print(len(more), errno.errorcode[e.errno])
for p in more:
    p.kill()
    p.wait()
del more"#;

#[tokio::test(flavor = "multi_thread")]
async fn live_state_background_processes_outlive_the_call_count_against_pids_and_go_on_reset() {
    let (_d, c, s) = session("[limits]\npids = 16\n").await;
    let marker = unique("bg");
    let start = format!(
        "import subprocess, sys\n\
         bg = [subprocess.Popen(['sleep', '300']) for _ in range(3)]\n\
         bg.append(subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', '{marker}']))\n\
         print(len(bg))"
    );
    let started = run(&c, &s, &start).await;
    assert_eq!(stdout(&started), "4\n", "{started:?}");
    assert_eq!(
        processes_with_marker(&marker).len(),
        1,
        "the background python runs on after its call"
    );

    let seen = run(
        &c,
        &s,
        "import os\n\
         cmds = [open('/proc/%s/cmdline' % p, 'rb').read().split(b'\\0')[0].decode()\n\
         \x20       for p in os.listdir('/proc') if p.isdigit() and int(p) > 2]\n\
         print(sorted(os.path.basename(c) for c in cmds))\n\
         print(all(p.poll() is None for p in bg))",
    )
    .await;
    assert_kept(&seen);
    assert_eq!(
        stdout(&seen),
        "['python', 'sleep', 'sleep', 'sleep']\nTrue\n",
        "{}",
        stderr(&seen)
    );

    let crowded = run(&c, &s, SPARE_PIDS).await;
    let fresh_run = send(&c, fresh(&s, &format!("{JAIL_PIDS}\n{SPARE_PIDS}"))).await;
    assert_reset(&fresh_run, ResetReason::FreshRequested);
    let crowded_out = stdout(&crowded);
    let fresh_out = stdout(&fresh_run);
    assert_eq!(fresh_run.outcome.status, Status::Ok, "{fresh_run:?}");
    let mut lines = fresh_out.lines();
    assert_eq!(
        lines.next(),
        Some("1 2"),
        "the reset took every background process"
    );
    let spare = |line: &str| -> u32 {
        let (n, errno) = line.trim().split_once(' ').expect("count and errno");
        assert_eq!(errno, "EAGAIN", "fork fails at pids.max: {line}");
        n.parse().unwrap()
    };
    let with_bg = spare(&crowded_out);
    let without = spare(lines.next().unwrap_or_default());
    assert_eq!(
        without - with_bg,
        4,
        "the 4 background processes count against pids \
         (with them: {crowded_out:?}, after the reset: {fresh_out:?})"
    );

    let deadline = Instant::now() + HANG_GUARD;
    while !processes_with_marker(&marker).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_no_survivors(&marker, "a fresh reset kills the old jail");
}

/// The host pid of the jail's process whose command line has `marker`.
fn pid_with_marker(marker: &str) -> i32 {
    let deadline = Instant::now() + HANG_GUARD;
    loop {
        if let Some((pid, _)) = processes_with_marker(marker).first() {
            return *pid;
        }
        assert!(Instant::now() < deadline, "{marker} never ran");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Bytes process `pid` has written so far (`wchar` of /proc/<pid>/io).
fn written(pid: i32) -> u64 {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).expect("/proc/<pid>/io");
    io.lines()
        .find_map(|l| l.strip_prefix("wchar: "))
        .and_then(|n| n.trim().parse().ok())
        .expect("wchar")
}

/// CPU time process `pid` has used, in clock ticks (utime + stime).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/<pid>/stat");
    // Fields after the command, which ends with the last ')'.
    let rest = &stat[stat.rfind(')').expect("stat") + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn live_state_a_background_flood_between_calls_blocks_and_costs_the_supervisor_nothing() {
    let (d, c, s) = session("").await;
    let marker = unique("flood");
    // The flood waits for a file the test writes once the call is over, so
    // none of it can reach the call that starts it.
    let start = format!(
        "import subprocess, sys\n\
         flood = subprocess.Popen([sys.executable, '-c', \
         'import os, time\\nwhile not os.path.exists(\"/workspace/go\"): time.sleep(0.01)\\n\
         while True: os.write(1, b\"y\" * 65536)', '{marker}'])\n\
         print('started')"
    );
    let started = run(&c, &s, &start).await;
    assert_eq!(stdout(&started), "started\n", "{started:?}");
    let pid = pid_with_marker(&marker);
    std::fs::write(d.workspace(&s).join("go"), "").expect("the flood's trigger");
    // No call runs: nothing reads the pipe, so the flood fills it and waits.
    std::thread::sleep(Duration::from_millis(300));
    let (wrote, ticks) = (written(pid), cpu_ticks(d.pid()));
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        written(pid),
        wrote,
        "the flood made no progress while no call ran"
    );
    let used = cpu_ticks(d.pid()) - ticks;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    assert!(
        used * 1000 / hz < 100,
        "the supervisor used {used} ticks of {hz}/s while no call ran"
    );
    assert_eq!(
        pipe_unread(pid, 1).expect("FIONREAD"),
        65536,
        "the pipe is full"
    );

    // A call reads again: its output begins with what waited in the pipe.
    let next = run(&c, &s, "flood.kill(); flood.wait(); print('after')").await;
    assert_kept(&next);
    let ys = next.stdout.iter().take_while(|b| **b == b'y').count();
    assert!(ys >= 65536, "{ys} bytes of the flood came first");
    if !next.stdout_truncated {
        assert!(stdout(&next).ends_with("yafter\n"), "{:?}", next.outcome);
    }
    assert_no_survivors(&marker, "the call killed the flood");
}

#[tokio::test(flavor = "multi_thread")]
async fn live_state_background_output_between_calls_waits_for_the_next_call() {
    let (d, c, s) = session("").await;
    let ws = d.workspace(&s);
    let marker = unique("bgout");
    // The background process prints a burst of `lines` lines whenever a
    // trigger file appears, then says so with another file.
    let printer = r#"import os, sys, time
n = 0
while True:
    n += 1
    while not os.path.exists('/workspace/go%d' % n):
        time.sleep(0.01)
    lines = int(open('/workspace/go%d' % n).read())
    for i in range(lines):
        print('bg%d-%d' % (n, i))
    sys.stdout.flush()
    open('/workspace/done%d' % n, 'w').close()
"#;
    let start = format!(
        "import subprocess, sys\n\
         printer = subprocess.Popen([sys.executable, '-c', {printer}, '{marker}'])\n\
         print('started')",
        printer = py_str(printer)
    );
    let started = run(&c, &s, &start).await;
    assert_eq!(stdout(&started), "started\n", "{started:?}");
    let pid = pid_with_marker(&marker);
    let burst =
        |n: usize, lines: usize| -> String { (0..lines).map(|i| format!("bg{n}-{i}\n")).collect() };

    // A burst that fits in the pipe, while no call runs: the next call's
    // output begins with it.
    std::fs::write(ws.join("go1"), "2000").unwrap();
    wait_for_file(&ws, "done1");
    let after = run(&c, &s, "print('after')").await;
    assert_kept(&after);
    assert_eq!(stdout(&after), format!("{}after\n", burst(1, 2000)));

    // A burst larger than the pipe: the printer blocks until a call reads.
    std::fs::write(ws.join("go2"), "20000").unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !ws.join("done2").exists(),
        "the printer waits while no call runs"
    );
    let unread = pipe_unread(pid, 1).expect("FIONREAD");
    assert!(
        unread > 60 * 1024,
        "the pipe is full: {unread} bytes unread"
    );
    let during = run(
        &c,
        &s,
        "import os, time\n\
         while not os.path.exists('/workspace/done2'):\n\
         \x20   time.sleep(0.01)\n\
         print('end')",
    )
    .await;
    assert_eq!(stdout(&during), format!("{}end\n", burst(2, 20000)));

    let reset = send(&c, fresh(&s, JAIL_PIDS)).await;
    assert_eq!(stdout(&reset), "1 2\n");
    let deadline = Instant::now() + HANG_GUARD;
    while !processes_with_marker(&marker).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_no_survivors(&marker, "a fresh reset kills the printer");
}

#[tokio::test(flavor = "multi_thread")]
async fn live_state_a_cell_of_20000_characters_runs() {
    let (_d, c, s) = session("").await;
    let head = "total = 0\n";
    let line = "total += 1\n";
    let tail = "print(total)\n";
    // Whole lines, then a comment of at least 10 characters fills it up.
    let n = (20_000 - head.len() - tail.len() - 10) / line.len();
    let mut code = format!("{head}{}", line.repeat(n));
    let pad = 20_000 - code.len() - tail.len();
    code.push_str(&format!("#{}\n", "p".repeat(pad - 2)));
    code.push_str(tail);
    assert_eq!(code.chars().count(), 20_000);
    let r = send(&c, run_req(&s, &code)).await;
    assert_eq!(r.outcome.status, Status::Ok, "{}", stderr(&r));
    assert_eq!(stdout(&r), format!("{n}\n"));
    let next = run(&c, &s, "total").await;
    assert_kept(&next);
    assert_eq!(next.interpreter.result, Some(n.to_string()));
}

#[tokio::test(flavor = "multi_thread")]
async fn live_state_session_packages_never_shadow_the_standard_library() {
    let d = Daemon::start(&live_policy(&format!("{NO_POOL}idle_ttl = \"1s\""), ""));
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap().session_id;
    // What `pip install --target` would put there: a package of its own,
    // and modules named like the standard library's.
    let plant = "import importlib, os\n\
        site = '/workspace/.prims/site-packages'\n\
        os.makedirs(site, exist_ok=True)\n\
        for name in ('statistics', 'pickle'):\n\
        \x20   with open(os.path.join(site, name + '.py'), 'w') as f:\n\
        \x20       f.write(\"open('/workspace/planted-%s-ran' % __name__, 'w').close()\\n\")\n\
        with open(os.path.join(site, 'session_pkg.py'), 'w') as f:\n\
        \x20   f.write('VALUE = 42\\n')\n\
        importlib.invalidate_caches()\n\
        n = 5";
    let planted = run(&c, &s, plant).await;
    assert_eq!(planted.outcome.status, Status::Ok, "{planted:?}");
    let used = run(
        &c,
        &s,
        "import statistics, session_pkg, sys\n\
         print(statistics.__file__)\n\
         print(session_pkg.VALUE, sys.path[sys.path.index('/usr/lib/python3.11'):])",
    )
    .await;
    assert_kept(&used);
    assert_eq!(
        stdout(&used),
        "/usr/lib/python3.11/statistics.py\n42 ['/usr/lib/python3.11', '/usr/lib/python3.11/lib-dynload', \
         '/venv/lib/python3.11/site-packages', '/workspace/.prims/site-packages', '/ipython']\n",
        "{used:?}"
    );
    // A stop saves with the agent's own pickle, and the restore too.
    wait_for_stats(&c, "the idle interpreter stopped", |s| {
        s.interpreters_live == 0
    })
    .await;
    let back = run(&c, &s, "print(n)").await;
    assert_reset(&back, ResetReason::StoppedIdle);
    assert_eq!(stdout(&back), "5\n", "{back:?}");
    let ws = d.workspace(&s);
    for name in ["statistics", "pickle"] {
        assert!(
            !ws.join(format!("planted-{name}-ran")).exists(),
            "a planted {name}.py ran"
        );
    }
}

/// A package index that never answers: it takes connections and holds
/// them, so an install from it waits for a timeout of pip's (fetching uv)
/// or uv's, or for `python.build_timeout` (here 90 s): minutes, far past
/// the limits of the calls below.
fn silent_index() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback listener");
    let port = l.local_addr().expect("its address").port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in l.incoming().flatten() {
            held.push(conn);
        }
    });
    format!("http://127.0.0.1:{port}/simple")
}

/// A supervisor whose package index never answers, with a grace long
/// enough that an interrupt is answered on a loaded host, and a wall limit
/// far past the CPU limits asked for.
fn silent_index_daemon() -> Daemon {
    Daemon::start_with_python(
        &live_policy(
            &format!("{NO_POOL}interrupt_grace = \"5s\""),
            "[limits]\nwall_time = \"120s\"\n",
        ),
        &format!(
            "index_url = {:?}\nbuild_timeout = \"90s\"\n",
            silent_index()
        ),
    )
}

/// A session of a [`silent_index_daemon`]: its installs never end.
async fn stalled_pip_session() -> (Daemon, prims_protocol::client::Client, String) {
    let d = silent_index_daemon();
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap().session_id;
    let set = run(&c, &s, "x = 'kept'").await;
    assert_eq!(set.outcome.status, Status::Ok, "{set:?}");
    (d, c, s)
}

/// A thread that burns CPU until `stop` is set, then an install that
/// never ends.
const BURN_THEN_PIP: &str = "import threading\n\
    stop = threading.Event()\n\
    def burn():\n\
    \x20   while not stop.is_set():\n\
    \x20       pass\n\
    threading.Thread(target=burn, daemon=True).start()\n\
    %pip install prims-never-answered\n\
    print('after the install')";

/// What an install of a supervisor without uv says first: it fetches uv
/// with the host's pip, from the index (here the silent one).
const FETCHING_UV: &str = "installing uv (once per server) with pip";

/// `%pip install` under a limit that runs out while it installs: the cell
/// is interrupted at the limit as any cell is (not after the install), the
/// result names the limit and says the install was cut, and the
/// interpreter goes on with its state. The install it cut (here the
/// host's pip fetching uv) is stopped, so the interpreter's next install
/// starts at once rather than wait minutes for it.
async fn pip_cut_by(kind: &str, limit: &str, set: impl FnOnce(&mut LimitRequest)) {
    let (d, c, s) = stalled_pip_session().await;
    let asked = Instant::now();
    let cut = send(&c, limited(&s, BURN_THEN_PIP, set)).await;
    let took = asked.elapsed();
    assert_eq!(cut.outcome.status, Status::Timeout, "{cut:?}");
    assert_eq!(cut.outcome.timeout_kind.as_deref(), Some(kind), "{cut:?}");
    assert!(
        stderr(&cut).contains(&format!(
            "The call's {limit} limit ran out during a `%pip install`"
        )),
        "{}",
        stderr(&cut)
    );
    assert!(
        !stdout(&cut).contains("after the install"),
        "the cell went on only after the install: {}",
        stdout(&cut)
    );
    // 1 s of limit and 5 s of grace, on a loaded host; the install alone
    // runs for 90 s.
    assert!(took < Duration::from_secs(45), "the call took {took:?}");
    assert_eq!(cut.outcome.signal, None, "interrupted, not killed: {cut:?}");
    // The host's pip that fetched uv for it (into `state/.tools-*`) is
    // killed, not left to pip's own timeouts.
    let fetching = format!("{}/.tools-", d.state.display());
    let gone = wait_until(STOPPED_WITHIN, || {
        processes_with_marker(&fetching).is_empty()
    })
    .await;
    assert!(
        gone,
        "the cut install's pip still runs: {:?}",
        processes_with_marker(&fetching)
    );
    let after = run(&c, &s, "stop.set()\nprint(x)").await;
    assert_kept(&after);
    assert_eq!(stdout(&after), "kept\n", "{}", stderr(&after));
    let again = send(
        &c,
        limited(&s, "%pip install prims-never-answered-either", |l| {
            l.wall_time_ms = Some(5000)
        }),
    )
    .await;
    assert_kept(&again);
    assert_eq!(again.outcome.status, Status::Timeout, "{again:?}");
    assert_eq!(again.outcome.timeout_kind.as_deref(), Some("wall"));
    assert!(
        stdout(&again).contains(FETCHING_UV),
        "the next install did not start: {}",
        stdout(&again)
    );
}

/// How long a cut install may take to be gone, on a loaded host: its
/// jail (or pip) is killed at the cut, and a jail's end takes a moment.
const STOPPED_WITHIN: Duration = Duration::from_secs(15);

/// Whether `done` holds within `within`, looking every 50 ms.
async fn wait_until(within: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if done() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn live_state_pip_install_counts_against_the_wall_limit() {
    pip_cut_by("wall", "wall time", |l| l.wall_time_ms = Some(1000)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn live_state_the_cpu_limit_is_watched_while_pip_installs() {
    pip_cut_by("cpu", "CPU time", |l| l.cpu_time_ms = Some(1000)).await;
}

/// uv for supervisors whose index has none: installed once with the
/// host's pip into the target directory (where the supervisor's own
/// environment tests keep theirs), and copied into a supervisor's state
/// directory, where it looks for the uv it installed itself.
fn seed_uv(d: &Daemon) {
    let uv = prims_tests::harness::shared_uv();
    let bin = d.state.join("tools/bin");
    std::fs::create_dir_all(&bin).expect("the supervisor's tools dir");
    std::fs::copy(uv, bin.join("uv")).expect("copying uv");
}

/// The job cgroups of the supervisor's session installs (`-pip-`) and of
/// the tidy step after one that did not end (`-tidy-`).
fn install_jobs(d: &Daemon) -> BTreeSet<String> {
    d.job_cgroups()
        .into_iter()
        .filter(|n| n.contains("-pip-") || n.contains("-tidy-"))
        .collect()
}

/// A `%pip install` whose install jail waits on an index that never
/// answers, cut by the call's `timeout_s`: the install jail is killed at
/// the cut, not left to run to `python.build_timeout` (90 s here), and the
/// interpreter keeps its state.
#[tokio::test(flavor = "multi_thread")]
async fn live_state_a_pip_install_cut_by_timeout_s_is_stopped() {
    let d = silent_index_daemon();
    // uv is there: the install gets as far as its jail.
    seed_uv(&d);
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap().session_id;
    let set = run(&c, &s, "x = 'kept'").await;
    assert_eq!(set.outcome.status, Status::Ok, "{set:?}");
    let requirement = "prims-cut-in-its-jail";
    let code = format!("%pip install {requirement}\nprint('after the install')");
    let mut seen = BTreeSet::new();
    let cut = {
        let call = send(&c, limited(&s, &code, |l| l.wall_time_ms = Some(4000)));
        tokio::pin!(call);
        loop {
            tokio::select! {
                cut = &mut call => break cut,
                () = tokio::time::sleep(Duration::from_millis(20)) => {
                    seen.extend(install_jobs(&d));
                }
            }
        }
    };
    assert_eq!(cut.outcome.status, Status::Timeout, "{cut:?}");
    assert_eq!(cut.outcome.timeout_kind.as_deref(), Some("wall"), "{cut:?}");
    assert!(
        stderr(&cut).contains("The call's wall time limit ran out during a `%pip install`"),
        "{}",
        stderr(&cut)
    );
    assert!(
        seen.iter().any(|n| n.contains("-pip-")),
        "no install jail ran during the call: {seen:?}\n{}",
        d.log()
    );
    // Its jail, and whatever ran in it (uv names the requirement), go.
    let gone = wait_until(STOPPED_WITHIN, || {
        install_jobs(&d).is_disjoint(&seen) && processes_with_marker(requirement).is_empty()
    })
    .await;
    assert!(
        gone,
        "the cut install still runs: jobs {:?}, processes {:?}",
        install_jobs(&d),
        processes_with_marker(requirement)
    );
    let after = run(&c, &s, "print(x)").await;
    assert_kept(&after);
    assert_eq!(stdout(&after), "kept\n", "{}", stderr(&after));
}

/// The local package index of the supervisor's environment tests.
const PKGINDEX: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../supervisor/tests/envs_support/pkgindex.py"
);

/// A PEP 503 index on host loopback with one wheel, `prims-many` 1.0: a
/// package of [`MANY`] modules, whose moves into a site directory take a
/// while. Killed on drop.
struct ManyIndex {
    _root: tempfile::TempDir,
    server: std::process::Child,
    url: String,
}

/// Modules in `prims_many` besides its `__init__`: enough that moving
/// them takes tens of milliseconds, in which the host stops the mover.
const MANY: usize = 4000;

impl ManyIndex {
    fn start() -> ManyIndex {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().display().to_string();
        let mut args = vec![
            PKGINDEX.to_string(),
            "wheel".into(),
            dir.clone(),
            "prims_many".into(),
            "1.0".into(),
            "prims_many/__init__.py=".into(),
        ];
        args.extend((0..MANY).map(|i| format!("prims_many/m{i}.py=X = {i}")));
        let out = std::process::Command::new("/usr/bin/python3")
            .args(&args)
            .output()
            .expect("running pkgindex.py");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut server = std::process::Command::new("/usr/bin/python3")
            .args([PKGINDEX, "serve", &dir])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("serving the index");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(server.stdout.take().expect("its stdout")),
            &mut line,
        )
        .expect("the index's port");
        let port: u16 = line.trim().parse().expect("the index prints its port");
        ManyIndex {
            _root: root,
            server,
            url: format!("http://127.0.0.1:{port}/simple"),
        }
    }
}

impl Drop for ManyIndex {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

/// Stops the install jail's program as it starts moving `prims_many` into
/// the session's site directory `site` (seen by inotify on the host, as
/// the first path of it appears there), then writes `flag`: the cell's
/// code, seeing it, burns through the call's CPU limit. Returns what the
/// site directory held once the program had stopped: its entries, and how
/// many modules of `prims_many` had come.
fn stop_the_moves(site: &Path, flag: &Path) -> Result<(Vec<String>, usize), String> {
    let deadline = Instant::now() + Duration::from_secs(100);
    let late = || Instant::now() > deadline;
    // SAFETY: inotify_init1 has no memory-safety preconditions.
    let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK) };
    if fd < 0 {
        return Err(format!("inotify: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: fd was just opened and is owned by nothing else.
    let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    let path = std::ffi::CString::new(site.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
    // SAFETY: fd is an inotify fd and path a NUL-terminated string.
    let wd = unsafe { libc::inotify_add_watch(fd.as_raw_fd(), path.as_ptr(), libc::IN_CREATE) };
    if wd < 0 {
        return Err(format!(
            "watching {}: {}",
            site.display(),
            std::io::Error::last_os_error()
        ));
    }
    // The program: python with its verdict's prefix and the requirement
    // on its command line (uv has the one, the tidy step the other).
    let program = loop {
        let found: Vec<i32> = processes_with_marker("prims-many")
            .into_iter()
            .filter(|(_, cmd)| cmd.contains("PRIMS-INSTALL"))
            .map(|(pid, _)| pid)
            .collect();
        if let [pid] = found[..] {
            break pid;
        }
        if late() {
            return Err(format!("no install program found: {found:?}"));
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let stop = |sig: libc::c_int| {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(program, sig) };
    };
    // Stopped once /proc says so; then nothing it does moves on.
    let stopped = || loop {
        let Ok(st) = std::fs::read_to_string(format!("/proc/{program}/stat")) else {
            return Err("the install program ended before it was stopped".to_string());
        };
        let state = st.rsplit_once(')').map(|(_, rest)| rest.trim_start());
        if state.is_some_and(|s| s.starts_with('T')) {
            return Ok(());
        }
        if late() {
            return Err(format!("the install program did not stop: {st}"));
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    // Held until the watch is ready for its first move (it runs uv first,
    // which this does not stop): an install quicker than the search above
    // would have moved on.
    stop(libc::SIGSTOP);
    stopped()?;
    let names = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    };
    let early = names(site);
    if !early.is_empty() {
        return Err(format!("found the install program too late: {early:?}"));
    }
    let mut buf = [0u8; 4096];
    // What came before the program stopped (nothing of it) goes unread.
    loop {
        // SAFETY: buf is writable for its length (and the fd non-blocking).
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            break;
        }
    }
    stop(libc::SIGCONT);
    'events: loop {
        let mut pfd = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: pfd is one valid pollfd.
        unsafe { libc::poll(&mut pfd, 1, 100) };
        // SAFETY: buf is writable for its length.
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        let n = usize::try_from(n).unwrap_or(0);
        let mut at = 0usize;
        while at + 16 <= n {
            // struct inotify_event: wd, mask, cookie, len (4 bytes each), name.
            let len = u32::from_ne_bytes([buf[at + 12], buf[at + 13], buf[at + 14], buf[at + 15]])
                as usize;
            let name = &buf[at + 16..(at + 16 + len).min(n)];
            if name.starts_with(b"prims_many") {
                stop(libc::SIGSTOP);
                break 'events;
            }
            at += 16 + len;
        }
        if late() {
            return Err("the install never moved prims_many into the site directory".into());
        }
    }
    stopped()?;
    let modules = names(&site.join("prims_many"))
        .iter()
        .filter(|n| n.ends_with(".py"))
        .count();
    let held = names(site);
    std::fs::write(flag, "").map_err(|e| e.to_string())?;
    Ok((held, modules))
}

/// A `%pip install` killed halfway through moving a package into the
/// session's site directory (its program stopped there from outside, then
/// the call cut by its CPU limit): the install jail is killed, what it had
/// moved is taken out again, and the package is absent, not importable
/// without its metadata; installed again, it is whole.
#[tokio::test(flavor = "multi_thread")]
async fn live_state_a_pip_install_killed_while_it_moves_leaves_the_site_whole() {
    let index = ManyIndex::start();
    let d = Daemon::start_with_python(
        &format!(
            "[interpreters]\n{NO_POOL}interrupt_grace = \"5s\"\n\
             [sessions]\ndisk_quota = \"128MiB\"\nmin_free_disk = \"256MiB\"\n\
             [limits]\nwall_time = \"120s\"\n"
        ),
        &format!("index_url = {:?}\nbuild_timeout = \"90s\"\n", index.url),
    );
    seed_uv(&d);
    let c = d.client().await;
    let s = c.open_session(None).await.unwrap().session_id;
    let ws = d.workspace(&s);
    let site = ws.join(".prims/site-packages");
    // The cell burns CPU once the flag is there, until `stop`.
    let set = run(
        &c,
        &s,
        "import os, threading\n\
         os.makedirs('/workspace/.prims/site-packages', exist_ok=True)\n\
         stop = threading.Event()\n\
         def burn():\n\
         \x20   while not os.path.exists('/workspace/cut-now'):\n\
         \x20       if stop.wait(0.05):\n\
         \x20           return\n\
         \x20   while not stop.is_set():\n\
         \x20       pass\n\
         x = 'kept'",
    )
    .await;
    assert_eq!(set.outcome.status, Status::Ok, "{set:?}");
    let watcher = {
        let (site, flag) = (site.clone(), ws.join("cut-now"));
        std::thread::spawn(move || stop_the_moves(&site, &flag))
    };
    let code = "threading.Thread(target=burn, daemon=True).start()\n\
        %pip install prims-many\n\
        print('after the install')";
    let cut = send(&c, limited(&s, code, |l| l.cpu_time_ms = Some(2000))).await;
    let held = watcher.join().expect("the watcher");
    let (held, modules) = held.unwrap_or_else(|e| panic!("{e}\n{cut:?}\n{}", d.log()));
    assert_eq!(cut.outcome.status, Status::Timeout, "{cut:?}");
    assert_eq!(cut.outcome.timeout_kind.as_deref(), Some("cpu"), "{cut:?}");
    assert!(
        stderr(&cut).contains("The call's CPU time limit ran out during a `%pip install`"),
        "{}",
        stderr(&cut)
    );
    // It was stopped with the package's files on their way in and its
    // metadata not yet there: never the other way round.
    let metadata = held.iter().any(|n| n.ends_with(".dist-info"));
    assert!(
        !metadata || modules == MANY + 1,
        "the package's metadata was in the site directory before its files \
         ({modules} of {} modules): {held:?}",
        MANY + 1
    );
    assert!(
        !metadata && modules < MANY + 1,
        "the moves were over when the program stopped: {held:?}"
    );
    // The install jail is killed, and the tidy step after it has run.
    let gone = wait_until(STOPPED_WITHIN, || install_jobs(&d).is_empty()).await;
    assert!(
        gone,
        "the cut install still runs: {:?}\n{}",
        install_jobs(&d),
        d.log()
    );
    let left: Vec<String> = std::fs::read_dir(&site)
        .expect("the site directory")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        left.is_empty(),
        "the cut install left {left:?}: {:?}",
        std::fs::read_dir(site.join("prims_many")).map(|r| r
            .flatten()
            .map(|e| e.file_name())
            .take(20)
            .collect::<Vec<_>>())
    );
    let staged: Vec<_> = std::fs::read_dir(ws.join(".prims/installs"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(staged.is_empty(), "its staging is left: {staged:?}");
    let absent = run(
        &c,
        &s,
        "stop.set()\n\
         import importlib, importlib.metadata\n\
         importlib.invalidate_caches()\n\
         try:\n\
         \x20   import prims_many\n\
         \x20   print('importable')\n\
         except ImportError:\n\
         \x20   print('absent')\n\
         try:\n\
         \x20   importlib.metadata.version('prims-many')\n\
         \x20   print('metadata')\n\
         except importlib.metadata.PackageNotFoundError:\n\
         \x20   print('no metadata')\n\
         print(x)",
    )
    .await;
    assert_kept(&absent);
    assert_eq!(
        stdout(&absent),
        "absent\nno metadata\nkept\n",
        "{}",
        stderr(&absent)
    );
    let again = run(
        &c,
        &s,
        "%pip install prims-many\n\
         import os, prims_many\n\
         here = os.listdir(os.path.dirname(prims_many.__file__))\n\
         print(len([n for n in here if n.endswith('.py')]), importlib.metadata.version('prims-many'))",
    )
    .await;
    assert_kept(&again);
    assert!(
        stdout(&again).ends_with(&format!("{} 1.0\n", MANY + 1)),
        "{}\n{}",
        stdout(&again),
        stderr(&again)
    );
}
