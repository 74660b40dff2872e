//! What a well-behaved job sees: exact output, exit codes, signals, files in
//! the workspace, and the output cap.

use base64::Engine as _;
use prims_tests::*;
use std::os::unix::fs::MetadataExt;

const OUT: &[u8] = b"\xff\xfe\x00abc\n";
const ERR: &[u8] = b"\x80err\x00\xc3(\n";
const BYTES_CODE: &str = "import sys\n\
     sys.stdout.buffer.write(b'\\xff\\xfe\\x00abc\\n')\n\
     sys.stdout.flush()\n\
     sys.stderr.buffer.write(b'\\x80err\\x00\\xc3(\\n')\n\
     sys.stderr.flush()\n";

#[test]
fn happy_stdout_stderr_byte_exact_json() {
    let run = Job::new(BYTES_CODE).run();
    run.assert_ok();
    assert_eq!(
        run.stdout_bytes(),
        OUT,
        "stdout_base64:\n{}",
        run.describe()
    );
    assert_eq!(
        run.stderr_bytes(),
        ERR,
        "stderr_base64:\n{}",
        run.describe()
    );
    assert_eq!(
        run.json["stdout"].as_str(),
        Some(String::from_utf8_lossy(OUT).as_ref()),
        "stdout is the UTF-8-lossy text"
    );
    assert_eq!(
        run.json["stderr"].as_str(),
        Some(String::from_utf8_lossy(ERR).as_ref())
    );
    assert_eq!(run.json["truncated"]["stdout"], false);
    assert_eq!(run.json["truncated"]["stderr"], false);
    assert_eq!(run.exit_code(), Some(0));
    assert!(run.signal().is_none(), "{}", run.describe());
}

#[test]
fn happy_stdout_stderr_byte_exact_raw() {
    let out = Job::new(BYTES_CODE).raw().run_raw();
    assert_eq!(out.code, Some(0), "{}", out.describe());
    assert_eq!(out.stdout, OUT, "{}", out.describe());
    assert_eq!(out.stderr, ERR, "{}", out.describe());
}

#[test]
fn happy_large_output_under_cap_exact() {
    // 1 MiB cap; print 1 MiB - 1 bytes of a pattern covering every byte value.
    let n = (1usize << 20) - 1;
    let run = Job::new(format!(
        "import sys\n_d = bytes(range(256)) * 4096\nsys.stdout.buffer.write(_d[:{n}])\n"
    ))
    .policy("[limits]\nwall_time = \"10s\"\noutput_bytes = \"1MiB\"\n")
    .run();
    run.assert_ok();
    let expected: Vec<u8> = (0..n).map(|i| (i % 256) as u8).collect();
    let got = run.stdout_bytes();
    assert_eq!(got.len(), n, "stdout length");
    assert!(got == expected, "stdout bytes differ from the pattern");
    assert_eq!(run.json["truncated"]["stdout"], false, "{}", run.describe());
}

#[test]
fn happy_exit_code_reported() {
    let run = Job::new("import sys\nsys.exit(3)\n").run();
    run.assert_status("exit");
    assert_eq!(run.exit_code(), Some(3), "{}", run.describe());
    assert!(run.signal().is_none(), "{}", run.describe());
    assert_eq!(run.prims_exit(), Some(3), "{}", run.describe());
    let raw = Job::new("import sys\nsys.exit(3)\n").raw().run_raw();
    assert_eq!(raw.code, Some(3), "without --json:\n{}", raw.describe());
}

#[test]
fn happy_signal_reported() {
    let run = Job::new("import os\nos.kill(os.getpid(), 9)\n").run();
    run.assert_status("signal");
    assert_eq!(run.signal(), Some(9), "{}", run.describe());
    assert!(run.exit_code().is_none(), "{}", run.describe());
    assert_eq!(run.prims_exit(), Some(128 + 9), "{}", run.describe());
    let raw = Job::new("import os\nos.kill(os.getpid(), 15)\nprint('after')\n")
        .raw()
        .run_raw();
    if prims_tests::harness::live_mode() {
        // A live interpreter's own python outlives SIGTERM (prims_agent.stops:
        // a process manager's stop must not end it before its session is
        // saved), so the cell goes on; a process user code starts does not.
        assert_eq!(raw.code, Some(0), "without --json:\n{}", raw.describe());
        assert_eq!(raw.stdout_str(), "after\n", "{}", raw.describe());
    } else {
        assert_eq!(
            raw.code,
            Some(128 + 15),
            "without --json:\n{}",
            raw.describe()
        );
    }
}

fn output_file_owner_check(policy: &str, expected_uid: u32) {
    let ws = workspace_dir();
    let run = Job::new(
        "import os\n\
         open('/workspace/output/result.txt', 'w').write('hello from the jail\\n')\n\
         os.mkdir('/workspace/output/sub')\n\
         open('/workspace/output/sub/deep.bin', 'wb').write(b'\\0\\1\\2')\n",
    )
    .policy(policy)
    .workspace(ws.path())
    .run();
    run.assert_ok();
    assert_eq!(
        run.json["host_uid"].as_u64(),
        Some(expected_uid as u64),
        "{}",
        run.describe()
    );
    assert_eq!(
        run.json["workspace"].as_str(),
        Some(ws.path().to_str().unwrap()),
        "{}",
        run.describe()
    );
    let out = ws.path().join("output");
    assert_eq!(
        std::fs::read_to_string(out.join("result.txt")).unwrap(),
        "hello from the jail\n"
    );
    assert_eq!(
        std::fs::read(out.join("sub/deep.bin")).unwrap(),
        b"\0\x01\x02"
    );
    for p in [
        out.join("result.txt"),
        out.join("sub"),
        out.join("sub/deep.bin"),
        out.clone(),
        ws.path().join("mounts"),
        ws.path().to_path_buf(),
    ] {
        assert_eq!(
            owner(&p),
            (expected_uid, expected_uid),
            "owner of {}",
            p.display()
        );
    }
}

#[test]
fn happy_output_files_owned_by_default_host_uid() {
    output_file_owner_check("[limits]\nwall_time = \"10s\"\n", 200_000);
}

#[test]
fn happy_output_files_owned_by_policy_uid_base() {
    output_file_owner_check(
        "[limits]\nwall_time = \"10s\"\n[identity]\nuid_base = 310000\n",
        310_000,
    );
}

#[test]
fn happy_mounts_read_only_erofs() {
    let ws = workspace_dir();
    std::fs::create_dir_all(ws.path().join("mounts")).unwrap();
    std::fs::write(ws.path().join("mounts/input.csv"), "a,b\n1,2\n").unwrap();
    let run = Job::probe(
        "kv('input', open('/workspace/mounts/input.csv').read().replace('\\n', '|'))\n\
         err('create', open, '/workspace/mounts/new.txt', 'w')\n\
         err('truncate_input', open, '/workspace/mounts/input.csv', 'w')\n\
         err('mkdir', os.mkdir, '/workspace/mounts/d')\n\
         err('unlink_input', os.unlink, '/workspace/mounts/input.csv')\n\
         err('output_write', lambda: open('/workspace/output/ok.txt', 'w').write('x'))\n",
    )
    .workspace(ws.path())
    .run();
    run.assert_ok();
    run.checks()
        .kv_eq("input", "a,b|1,2|")
        .os_errno("create", libc::EROFS)
        .os_errno("truncate_input", libc::EROFS)
        .os_errno("mkdir", libc::EROFS)
        .os_errno("unlink_input", libc::EROFS)
        // Control: the rest of the workspace is writable.
        .os_ok("output_write")
        .check(
            std::fs::read_to_string(ws.path().join("mounts/input.csv")).unwrap() == "a,b\n1,2\n",
            "the host copy of the input is unchanged",
        )
        .finish();
}

#[test]
fn happy_output_cap_truncates() {
    let run = Job::new("import sys\nsys.stdout.write('0123456789' * 1024)\n")
        .policy("[limits]\nwall_time = \"10s\"\noutput_bytes = \"1KiB\"\n")
        .run();
    let got = run.stdout_bytes();
    let expected = "0123456789".repeat(1024);
    assert_eq!(
        run.json["truncated"]["stdout"],
        true,
        "truncated.stdout:\n{}",
        run.describe()
    );
    assert_eq!(got.len(), 1024, "stdout length:\n{}", run.describe());
    assert_eq!(
        &got[..],
        &expected.as_bytes()[..1024],
        "stdout is the prefix"
    );
    assert_eq!(run.json["truncated"]["stderr"], false, "{}", run.describe());
    eprintln!(
        "note: a run over the output cap ends with status {:?}, exit {:?}",
        run.status(),
        run.prims_exit()
    );
}

#[test]
fn happy_fork_threads_subprocess_work() {
    // Controls for the seccomp filter: ordinary process and thread creation
    // (clone without CLONE_NEW*, clone3 falling back on ENOSYS) works.
    let run = Job::new(
        "import os, threading, subprocess\n\
         r = []\n\
         t = threading.Thread(target=lambda: r.append(41 + 1))\n\
         t.start(); t.join()\n\
         print('thread', r[0])\n\
         p = os.fork()\n\
         if p == 0:\n    os._exit(5)\n\
         print('fork', os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]))\n\
         print('sub', subprocess.run(['/venv/bin/python', '-c', 'print(6*7)'], capture_output=True, text=True).stdout.strip())\n\
         import socket\n\
         a, b = socket.socketpair()\n\
         a.send(b'ping'); print('socketpair', b.recv(4).decode())\n",
    )
    .run();
    run.assert_ok();
    assert_eq!(
        run.lines(),
        vec!["thread 42", "fork 5", "sub 42", "socketpair ping"],
        "{}",
        run.describe()
    );
}

/// `multiprocessing` runs unchanged: its locks and queues are POSIX
/// semaphores in the jail's own `/dev/shm`, its managers listen on Unix
/// sockets, and each start method works.
#[test]
fn happy_multiprocessing_runs_unchanged() {
    let run = Job::new(
        "import concurrent.futures as cf, multiprocessing as mp, os, sys\n\
         from multiprocessing import shared_memory\n\
         open('mpwork.py', 'w').write('def square(x):\\n    return x * x\\n')\n\
         sys.path.insert(0, os.getcwd())\n\
         import mpwork\n\
         for method in ('fork', 'spawn', 'forkserver'):\n\
         \x20   with mp.get_context(method).Pool(2) as pool:\n\
         \x20       print(method, pool.map(mpwork.square, range(4)))\n\
         q = mp.Queue()\n\
         p = mp.Process(target=q.put, args=(42,))\n\
         p.start()\n\
         print('queue', q.get(timeout=30))\n\
         p.join()\n\
         with mp.Manager() as m:\n\
         \x20   d = m.dict()\n\
         \x20   d['k'] = 'v'\n\
         \x20   print('manager', dict(d))\n\
         s = shared_memory.SharedMemory(create=True, size=16)\n\
         s.buf[:2] = b'ok'\n\
         t = shared_memory.SharedMemory(s.name)\n\
         print('shared', bytes(t.buf[:2]))\n\
         t.close(); s.close(); s.unlink()\n\
         with cf.ProcessPoolExecutor(2) as ex:\n\
         \x20   print('executor', list(ex.map(mpwork.square, range(3))))\n",
    )
    .policy(policy_with("60s", ""))
    .run();
    run.assert_ok();
    assert_eq!(
        run.lines(),
        vec![
            "fork [0, 1, 4, 9]",
            "spawn [0, 1, 4, 9]",
            "forkserver [0, 1, 4, 9]",
            "queue 42",
            "manager {'k': 'v'}",
            "shared b'ok'",
            "executor [0, 1, 4]",
        ],
        "{}",
        run.describe()
    );
}

/// A session's cells are its `__main__`, with no file to import again: a
/// spawned or forkserver child finds the cells' functions and classes all
/// the same, as a script's child finds the script's. (A one-shot jail runs
/// `python -c`, whose children do not, as anywhere else.)
#[test]
fn happy_multiprocessing_spawns_code_defined_in_a_cell() {
    let run = Job::new(
        "import multiprocessing as mp\n\
         class Point:\n\
         \x20   def __init__(self, x):\n\
         \x20       self.x = x\n\
         def norm(p):\n\
         \x20   return Point(p.x * p.x)\n\
         for method in ('spawn', 'forkserver'):\n\
         \x20   with mp.get_context(method).Pool(2) as pool:\n\
         \x20       got = pool.map(norm, [Point(i) for i in range(4)])\n\
         \x20   print(method, [p.x for p in got], all(isinstance(p, Point) for p in got))\n",
    )
    // A one-shot jail's pool waits for children that keep failing: its
    // wall clock ends it.
    .policy(policy_with(
        if harness::live_mode() { "60s" } else { "5s" },
        "",
    ))
    .run();
    if !harness::live_mode() {
        assert!(
            run.stderr().contains("Can't get attribute 'norm'"),
            "{}",
            run.describe()
        );
        return;
    }
    run.assert_ok();
    assert_eq!(
        run.lines(),
        vec!["spawn [0, 1, 4, 9] True", "forkserver [0, 1, 4, 9] True"],
        "{}",
        run.describe()
    );
}

#[test]
fn happy_workspace_persists_between_runs() {
    let ws = workspace_dir();
    Job::new("open('/workspace/output/state.txt', 'w').write('one')\n")
        .workspace(ws.path())
        .run()
        .assert_ok();
    let run = Job::new("print(open('/workspace/output/state.txt').read())\n")
        .workspace(ws.path())
        .run();
    run.assert_ok();
    assert_eq!(run.stdout(), "one\n", "{}", run.describe());
    let m = std::fs::metadata(ws.path().join("output/state.txt")).unwrap();
    assert_eq!(m.uid(), run.json["host_uid"].as_u64().unwrap() as u32);
}

#[test]
fn happy_outcome_fields_present() {
    let run = Job::new("print(1)\n").run();
    run.assert_ok();
    let j = &run.json;
    let mut c = run.checks();
    for k in [
        "status",
        "exit_code",
        "signal",
        "wall_ms",
        "cpu_ms",
        "memory_peak_bytes",
        "oom_killed",
        "enforced",
        "stdout",
        "stderr",
        "stdout_base64",
        "stderr_base64",
        "truncated",
        "workspace",
        "host_uid",
    ] {
        c.check(j.get(k).is_some(), format!("outcome has `{k}`"));
    }
    for k in [
        "memory",
        "pids",
        "cpu_time",
        "wall_time",
        "landlock",
        "landlock_abi",
        "seccomp",
        "cgroup",
    ] {
        c.check(
            j["enforced"].get(k).is_some(),
            format!("enforced has `{k}`"),
        );
    }
    c.check(j["stdout"] == "1\n", format!("stdout {}", j["stdout"]))
        .check(
            base64::engine::general_purpose::STANDARD
                .decode(j["stdout_base64"].as_str().unwrap_or(""))
                .ok()
                .as_deref()
                == Some(b"1\n"),
            "stdout_base64 decodes to 1\\n",
        )
        .check(j["oom_killed"] == false, "oom_killed false")
        .check(
            j["enforced"]["seccomp"] == "full",
            format!("enforced.seccomp {}", j["enforced"]["seccomp"]),
        )
        .check(
            j["enforced"]["landlock"] == "full",
            format!(
                "enforced.landlock {} (abi {})",
                j["enforced"]["landlock"], j["enforced"]["landlock_abi"]
            ),
        )
        .check(
            j["enforced"]["cgroup"] == "v1",
            format!(
                "enforced.cgroup {} (this host is cgroup v1)",
                j["enforced"]["cgroup"]
            ),
        )
        .check(
            j["enforced"]["memory"] == "cgroup",
            format!("enforced.memory {}", j["enforced"]["memory"]),
        )
        .check(
            j["enforced"]["pids"] == "cgroup",
            format!("enforced.pids {}", j["enforced"]["pids"]),
        );
    c.finish();
}

#[test]
fn happy_temp_workspace_removed_after_run() {
    let run = Job::new("open('/workspace/output/x.txt', 'w').write('x')\n").run();
    run.assert_ok();
    let ws = run.json["workspace"]
        .as_str()
        .unwrap_or_else(|| panic!("workspace path:\n{}", run.describe()))
        .to_string();
    assert!(
        !std::path::Path::new(&ws).exists(),
        "the temporary workspace {ws} was removed"
    );
}
