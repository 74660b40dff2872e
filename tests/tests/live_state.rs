//! One session's live interpreter through the supervisor socket: state
//! kept between calls, the last expression's value, exceptions and exits,
//! `fresh`, a change of requirements, time and memory limits, output of
//! subprocesses, an stdout flood, background processes and a long cell.

use prims_protocol::jail::{LimitRequest, Status};
use prims_protocol::wire::{InterpreterState, ResetReason};
use prims_tests::daemon::{run_req, Daemon};
use prims_tests::live::*;
use prims_tests::{assert_no_survivors, processes_with_marker, py_str, unique};
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
    let (_d, c, s) = session("").await;
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
    let start = format!(
        "import subprocess, sys\n\
         flood = subprocess.Popen([sys.executable, '-c', \
         'import os\\nwhile True: os.write(1, b\"y\" * 65536)', '{marker}'])\n\
         print('started')"
    );
    let started = run(&c, &s, &start).await;
    assert_eq!(stdout(&started), "started\n", "{started:?}");
    let pid = pid_with_marker(&marker);
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

/// A session whose installs never end, with a grace long enough that an
/// interrupt is answered on a loaded host, and a wall limit far past the
/// CPU limits asked for.
async fn stalled_pip_session() -> (Daemon, prims_protocol::client::Client, String) {
    let d = Daemon::start_with_python(
        &live_policy(
            &format!("{NO_POOL}interrupt_grace = \"5s\""),
            "[limits]\nwall_time = \"120s\"\n",
        ),
        &format!(
            "index_url = {:?}\nbuild_timeout = \"90s\"\n",
            silent_index()
        ),
    );
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

/// `%pip install` under a limit that runs out while it installs: the cell
/// is interrupted at the limit as any cell is (not after the install), the
/// result names the limit and says the install was cut, and the
/// interpreter goes on with its state. The install it cut runs on, and the
/// interpreter's next install waits for it, under that call's limits.
async fn pip_cut_by(kind: &str, limit: &str, set: impl FnOnce(&mut LimitRequest)) {
    let (_d, c, s) = stalled_pip_session().await;
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
    let after = run(&c, &s, "stop.set()\nprint(x)").await;
    assert_kept(&after);
    assert_eq!(stdout(&after), "kept\n", "{}", stderr(&after));
    let again = send(
        &c,
        limited(&s, "%pip install prims-never-answered-either", |l| {
            l.wall_time_ms = Some(2000)
        }),
    )
    .await;
    assert_kept(&again);
    assert_eq!(again.outcome.status, Status::Timeout, "{again:?}");
    assert_eq!(again.outcome.timeout_kind.as_deref(), Some("wall"));
    assert!(
        stdout(&again).contains("waiting for an install that a time limit cut short to end first"),
        "{}",
        stdout(&again)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn live_state_pip_install_counts_against_the_wall_limit() {
    pip_cut_by("wall", "wall time", |l| l.wall_time_ms = Some(1000)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn live_state_the_cpu_limit_is_watched_while_pip_installs() {
    pip_cut_by("cpu", "CPU time", |l| l.cpu_time_ms = Some(1000)).await;
}
