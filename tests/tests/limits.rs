//! The resource rows of the escape catalogue: fork bomb, memory, disk,
//! orphans and time. Each test is prefixed with its class.

use prims_tests::*;
use std::process::Command;

// -------------------------------------------------------------- fork bomb

#[test]
fn fork_bomb_pids_max_eagain_and_host_still_forks() {
    let code = r#"
import os, time
n = 0
err = None
for i in range(1000):
    try:
        pid = os.fork()
    except OSError as e:
        err = e.errno
        break
    if pid == 0:
        time.sleep(8)
        os._exit(0)
    n += 1
print("forked", n, "errno", err, flush=True)
"#;
    let run = Job::new(code)
        .policy("[limits]\nwall_time = \"15s\"\npids = 16\n")
        .run();
    run.assert_ok();
    let line = run
        .lines()
        .into_iter()
        .find(|l| l.starts_with("forked "))
        .unwrap_or_default();
    let f: Vec<&str> = line.split_whitespace().collect();
    let n: i64 = f.get(1).and_then(|s| s.parse().ok()).unwrap_or(-1);
    let errno = f.get(3).copied().unwrap_or("?");
    eprintln!("note: fork bomb: {line:?}, wall_ms {:?}", run.wall_ms());
    let mut c = run.checks();
    c.check(
        errno == libc::EAGAIN.to_string(),
        format!("fork failed with EAGAIN (observed errno {errno}, line {line:?})"),
    )
    // pids = 16 counts init and python: at most 14 children.
    .check(
        (1..=14).contains(&n),
        format!("1..=14 forks succeeded before the limit (observed {n})"),
    )
    // The sleeping children are killed when python exits, not waited for.
    .check(
        run.wall_ms().unwrap_or(u64::MAX) < 6000,
        format!(
            "the run ended when python exited (wall_ms {:?} < 6000, children sleep 8 s)",
            run.wall_ms()
        ),
    );
    // The host still forks and prims still answers.
    let st = Command::new("/bin/true").status();
    c.check(
        matches!(st, Ok(s) if s.success()),
        format!("host fork of /bin/true works ({st:?})"),
    );
    let again = Job::new("print('alive')").run();
    c.check(
        again.status() == "ok" && again.stdout() == "alive\n",
        format!(
            "a later run works ({:?} {:?})",
            again.status(),
            again.stdout()
        ),
    );
    c.finish();
}

// ----------------------------------------------------------------- memory

#[test]
fn memory_twice_the_limit_oom_or_memoryerror() {
    let run = Job::new("x = b'\\1' * (128 << 20)\nprint('survived', len(x))\n")
        .policy("[limits]\nwall_time = \"15s\"\nmemory = \"64MiB\"\n")
        .run();
    let oom = run.status() == "oom"
        && run.json["oom_killed"] == serde_json::Value::Bool(true)
        && run.prims_exit() == Some(137);
    let memerr = run.status() == "exit"
        && run.exit_code() == Some(1)
        && run.stderr().contains("MemoryError")
        && run.prims_exit() == Some(1);
    eprintln!(
        "note: memory: status {:?}, oom_killed {}, exit_code {:?}, memory_peak_bytes {}, stderr tail {:?}",
        run.status(),
        run.json["oom_killed"],
        run.exit_code(),
        run.json["memory_peak_bytes"],
        run.stderr().lines().last().unwrap_or("")
    );
    let mut c = run.checks();
    c.check(
        oom || memerr,
        format!(
            "either status oom + oom_killed true + exit 137, or status exit + exit_code 1 + MemoryError \
             (observed status {:?}, oom_killed {}, exit_code {:?}, prims exit {:?})",
            run.status(),
            run.json["oom_killed"],
            run.exit_code(),
            run.prims_exit()
        ),
    )
    .check(!run.stdout().contains("survived"), "the allocation never succeeded");
    if let Some(peak) = run.json["memory_peak_bytes"].as_u64() {
        c.check(
            peak <= 64 << 20,
            format!("memory_peak_bytes {peak} <= 64 MiB"),
        );
    }
    c.finish();
}

// ------------------------------------------------------------------- disk

#[test]
fn disk_tmp_quota_enospc() {
    let code = r#"
fd = os.open('/tmp/big', os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
chunk = b'\1' * 65536
written = 0
e = None
while written < 8 << 20:
    try:
        written += os.write(fd, chunk)
    except OSError as ex:
        e = ex.errno
        break
kv('written_le_4mib', written <= 4 << 20)
kv('errno', e)
"#;
    let run = Job::probe(code)
        .policy("[limits]\nwall_time = \"10s\"\ntmp_size = \"4MiB\"\n")
        .run();
    run.assert_ok();
    run.checks()
        .kv_eq("errno", &libc::ENOSPC.to_string())
        .kv_eq("written_le_4mib", "True")
        .finish();
}

#[test]
fn disk_file_size_limit_efbig() {
    // CPython ignores SIGXFSZ at start-up, so the write past RLIMIT_FSIZE
    // returns EFBIG instead of killing the process. The write that crosses
    // the limit is cut short at exactly the limit.
    let code = r#"
fd = os.open('/workspace/big', os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
chunk = b'\1' * 65536
written = 0
e = None
while written < 2 << 20:
    try:
        written += os.write(fd, chunk)
    except OSError as ex:
        e = ex.errno
        break
os.close(fd)
kv('errno', e)
kv('size', os.stat('/workspace/big').st_size)
"#;
    let run = Job::probe(code)
        .policy("[limits]\nwall_time = \"10s\"\nfile_size = \"1MiB\"\n")
        .run();
    run.assert_ok();
    run.checks()
        .kv_eq("errno", &libc::EFBIG.to_string())
        .kv_eq("size", &(1u64 << 20).to_string())
        .finish();
}

#[test]
fn disk_million_empty_files_enospc() {
    let code = r#"
n = 0
e = None
for i in range(1000000):
    try:
        os.close(os.open('/tmp/f%d' % i, os.O_WRONLY | os.O_CREAT, 0o600))
    except OSError as ex:
        e = ex.errno
        break
    n += 1
kv('errno', e)
kv('created', n)
"#;
    let run = Job::probe(code)
        .policy("[limits]\nwall_time = \"20s\"\ntmp_size = \"4MiB\"\n")
        .run();
    eprintln!(
        "note: million files: created {:?}, errno {:?}, wall_ms {:?}",
        run.kv("created"),
        run.kv("errno"),
        run.wall_ms()
    );
    let mut c = run.checks();
    c.check(
        run.status() == "ok",
        format!("python finished (status {:?})", run.status()),
    )
    .kv_eq("errno", &libc::ENOSPC.to_string());
    c.finish();
}

// ---------------------------------------------------------------- orphans

#[test]
fn orphans_double_fork_setsid_nothing_survives() {
    let marker = unique("orphan");
    let code = format!(
        r#"
import os, time
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv('/venv/bin/python', ['python', '-c', 'import time; time.sleep(60)  # {marker}'])
    os._exit(0)
os.waitpid(pid, 0)
seen = False
for _ in range(50):
    for p in os.listdir('/proc'):
        if p.isdigit() and int(p) != os.getpid():
            try:
                cmd = open('/proc/%s/cmdline' % p, 'rb').read()
            except OSError:
                continue
            if cmd.startswith(b'python\0-c\0import time') and b'{marker}' in cmd:
                seen = True
    if seen:
        break
    time.sleep(0.1)
print('seen_orphan', seen, flush=True)
print('main exits', flush=True)
"#
    );
    let run = Job::new(code)
        .policy("[limits]\nwall_time = \"30s\"\n")
        .run();
    let survivors = processes_with_marker(&marker);
    assert_no_survivors(&marker, "after the main process exited");
    let mut c = run.checks();
    c.check(
        run.status() == "ok" && run.stdout().contains("main exits"),
        format!("python exited 0 (status {:?})", run.status()),
    )
    .check(
        run.wall_ms().unwrap_or(u64::MAX) < 10_000,
        format!(
            "the run returned quickly (wall_ms {:?} < 10000)",
            run.wall_ms()
        ),
    )
    .check(
        survivors.is_empty(),
        format!("no survivors ({survivors:?})"),
    );
    c.finish();
}

// ------------------------------------------------------------------- time

#[test]
fn time_busy_loop_wall_timeout() {
    let run = Job::new("while True:\n    pass\n")
        .policy("[limits]\nwall_time = \"2s\"\ncpu_time = \"20s\"\n")
        .run();
    let wall = run.wall_ms().unwrap_or(0);
    run.checks()
        .check(
            run.status() == "timeout",
            format!("status {:?} (expected timeout)", run.status()),
        )
        .check(
            run.json["timeout_kind"] == "wall",
            format!(
                "timeout_kind {} (expected \"wall\")",
                run.json["timeout_kind"]
            ),
        )
        .check(
            (1900..6000).contains(&wall),
            format!("wall_ms {wall} within [1900, 6000)"),
        )
        .check(
            run.prims_exit() == Some(124),
            format!("prims exit {:?} (expected 124)", run.prims_exit()),
        )
        .finish();
}

#[test]
fn time_sigterm_ignored_sleep_timeout_nothing_survives() {
    let marker = unique("sigterm");
    let code = format!(
        r#"
import os
child = '''import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
time.sleep(60)  # {marker}
'''
if os.fork() == 0:
    os.execv('/venv/bin/python', ['python', '-c', child])
os.execv('/venv/bin/python', ['python', '-c', child])
"#
    );
    let run = Job::new(code)
        .policy("[limits]\nwall_time = \"2s\"\n")
        .run();
    let survivors = processes_with_marker(&marker);
    assert_no_survivors(&marker, "after the wall-time kill");
    run.checks()
        .check(
            run.status() == "timeout",
            format!("status {:?} (expected timeout)", run.status()),
        )
        .check(
            run.json["timeout_kind"] == "wall",
            format!("timeout_kind {}", run.json["timeout_kind"]),
        )
        .check(
            run.wall_ms().unwrap_or(u64::MAX) < 8000,
            format!("wall_ms {:?} < 8000", run.wall_ms()),
        )
        .check(
            survivors.is_empty(),
            format!("no survivors ({survivors:?})"),
        )
        .finish();
}

#[test]
fn time_cpu_limit_timeout_kind_cpu() {
    let run = Job::new("while True:\n    pass\n")
        .policy("[limits]\nwall_time = \"10s\"\ncpu_time = \"1s\"\n")
        .run();
    let wall = run.wall_ms().unwrap_or(u64::MAX);
    run.checks()
        .check(
            run.status() == "timeout",
            format!("status {:?} (expected timeout)", run.status()),
        )
        .check(
            run.json["timeout_kind"] == "cpu",
            format!(
                "timeout_kind {} (expected \"cpu\")",
                run.json["timeout_kind"]
            ),
        )
        .check(wall < 9000, format!("wall_ms {wall} < 9000"))
        .check(
            run.prims_exit() == Some(124),
            format!("prims exit {:?} (expected 124)", run.prims_exit()),
        )
        .finish();
}

/// `/dev/shm` is charged to the job: filling it ends at the run's memory
/// limit (an OOM kill, or ENOSPC at the tmpfs's size, which is that limit),
/// never on the host, and the pages written show in the job's own peak.
#[test]
fn memory_shm_is_charged_to_the_job() {
    let code = r#"
written = 0
chunk = b'\1' * (4 << 20)
try:
    # A file per chunk: one file stops at RLIMIT_FSIZE (limits.file_size).
    while written < (256 << 20):
        with open('/dev/shm/fill-%d' % written, 'wb') as f:
            f.write(chunk)
        written += len(chunk)
        print('written', written >> 20, flush=True)
except OSError as e:
    print('refused', e.errno, flush=True)
"#;
    let run = Job::new(code)
        .policy("[limits]\nwall_time = \"20s\"\nmemory = \"96MiB\"\n")
        .run();
    let written: u64 = run
        .stdout()
        .lines()
        .filter_map(|l| l.strip_prefix("written "))
        .filter_map(|n| n.trim().parse().ok())
        .next_back()
        .unwrap_or(0);
    let refused = run.stdout().contains(&format!("refused {}", libc::ENOSPC));
    let oom = run.status() == "oom" && run.json["oom_killed"] == serde_json::Value::Bool(true);
    eprintln!(
        "note: /dev/shm: {written} MiB written, status {:?}, refused {refused}, peak {}",
        run.status(),
        run.json["memory_peak_bytes"]
    );
    let mut c = run.checks();
    c.check(
        oom || refused,
        format!(
            "the run ends at its memory limit: an OOM kill or ENOSPC (status {:?}, stdout tail {:?})",
            run.status(),
            run.stdout().lines().last()
        ),
    )
    .check(
        (16..=96).contains(&written),
        format!("{written} MiB written: some, and no more than the 96 MiB limit"),
    );
    if let Some(peak) = run.json["memory_peak_bytes"].as_u64() {
        c.check(
            peak <= 96 << 20 && peak >= written << 20,
            format!("the job's peak {peak} holds the {written} MiB written, within 96 MiB"),
        );
    }
    c.finish();
}
