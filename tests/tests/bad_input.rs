//! Bad input never panics: policy errors name the key and position, the CLI
//! exits 125 with a `prims: ` message, and the jailer answers garbage with a
//! `setup_error` outcome.

use prims_tests::*;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

fn no_panic(out: &RawOutput) {
    let all = format!("{}{}", out.stdout_str(), out.stderr_str());
    assert!(
        !all.contains("panicked at") && !all.contains("RUST_BACKTRACE"),
        "the process panicked:\n{}",
        out.describe()
    );
    assert!(
        out.signal.is_none(),
        "the process died of a signal:\n{}",
        out.describe()
    );
}

fn policy_check(toml: &str) -> RawOutput {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("policy.toml");
    std::fs::write(&p, toml).unwrap();
    let mut cmd = Command::new(prims_bin());
    cmd.arg("policy").arg("check").arg(&p);
    run_with_timeout(cmd, Duration::from_secs(30))
}

fn assert_125_message(out: &RawOutput, must_mention: &[&str]) {
    no_panic(out);
    assert_eq!(out.code, Some(125), "exit code:\n{}", out.describe());
    let err = out.stderr_str();
    assert!(
        err.starts_with("prims: "),
        "stderr starts with `prims: `:\n{}",
        out.describe()
    );
    for m in must_mention {
        assert!(
            err.contains(m),
            "stderr mentions {m:?}:\n{}",
            out.describe()
        );
    }
}

// ----------------------------------------------------------- policy check

#[test]
fn bad_input_policy_check_bad_value_names_key_and_position() {
    let out = policy_check("[limits]\nwall_time = \"banana\"\n");
    no_panic(&out);
    assert_eq!(out.code, Some(1), "{}", out.describe());
    let all = format!("{}{}", out.stdout_str(), out.stderr_str());
    assert!(
        all.contains("limits.wall_time"),
        "key path:\n{}",
        out.describe()
    );
    assert!(
        all.contains("line 2") || all.contains(":2:"),
        "line number 2:\n{}",
        out.describe()
    );
    assert!(
        all.contains("column") || all.contains(":2:13") || all.contains(":2:1"),
        "column:\n{}",
        out.describe()
    );
}

#[test]
fn bad_input_policy_check_unknown_key() {
    let out = policy_check("[limits]\nwall_time = \"5s\"\nwal_time = \"5s\"\n");
    no_panic(&out);
    assert_eq!(out.code, Some(1), "{}", out.describe());
    let all = format!("{}{}", out.stdout_str(), out.stderr_str());
    assert!(all.contains("wal_time"), "{}", out.describe());
    assert!(
        all.contains("line 3") || all.contains(":3:"),
        "line 3:\n{}",
        out.describe()
    );
}

#[test]
fn bad_input_policy_check_bad_enum_and_syntax() {
    for toml in [
        "[network]\nmode = \"internet\"\n",
        "[limits\nwall_time = \"1s\"\n",
        "[limits]\nmemory = \"-5MiB\"\n",
        "[limits]\npids = \"many\"\n",
        "[identity]\nuid_base = 0\n",
    ] {
        let out = policy_check(toml);
        no_panic(&out);
        assert_eq!(out.code, Some(1), "policy {toml:?}:\n{}", out.describe());
        assert!(
            !out.stderr.is_empty() || !out.stdout.is_empty(),
            "an error message for {toml:?}"
        );
    }
}

#[test]
fn bad_input_policy_check_good_policy_exits_0() {
    let out = policy_check(
        "[limits]\nwall_time = \"3s\"\nmemory = \"64MiB\"\npids = 16\ntmp_size = \"4MiB\"\n[network]\nmode = \"loopback\"\n",
    );
    no_panic(&out);
    assert_eq!(out.code, Some(0), "{}", out.describe());
    assert!(
        out.stdout_str().contains("wall_time"),
        "prints the effective policy:\n{}",
        out.describe()
    );
}

// -------------------------------------------------------------------- run

#[test]
fn bad_input_run_bad_policy_exits_125() {
    for json in [false, true] {
        let mut job = Job::new("print(1)").policy("[limits]\nwall_time = \"banana\"\n");
        if !json {
            job = job.raw();
        }
        let out = job.run_raw();
        assert_125_message(&out, &["wall_time"]);
    }
}

#[test]
fn bad_input_run_missing_script() {
    require_root();
    let mut cmd = Command::new(prims_bin());
    cmd.args(["run", "/nonexistent/prims-test-script.py"]);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_125_message(&out, &["/nonexistent/prims-test-script.py"]);
}

#[test]
fn bad_input_run_missing_policy_file() {
    let out = Job::new("print(1)")
        .no_policy()
        .arg("--policy")
        .arg("/nonexistent/prims-policy.toml")
        .raw()
        .run_raw();
    assert_125_message(&out, &["/nonexistent/prims-policy.toml"]);
}

#[test]
fn bad_input_run_missing_interpreter_setup_error() {
    let policy = "[limits]\nwall_time = \"5s\"\n[filesystem]\ninterpreters = { \"3.11\" = \"/nonexistent/python\" }\ndefault_interpreter = \"3.11\"\n";
    let out = Job::new("print(1)").policy(policy).run_raw();
    no_panic(&out);
    assert_eq!(out.code, Some(125), "{}", out.describe());
    assert!(!out.stdout_str().contains("1\n") || out.stdout_str().starts_with('{'));
    match serde_json::from_slice::<serde_json::Value>(out.stdout.trim_ascii()) {
        Ok(j) => {
            assert_eq!(j["status"], "setup_error", "{}", out.describe());
            let msg = j["setup_error"]["message"].as_str().unwrap_or("");
            assert!(
                msg.contains("/nonexistent/python"),
                "setup_error.message names the missing interpreter:\n{}",
                out.describe()
            );
        }
        Err(_) => {
            // Refused before the jail: the CLI's own message.
            assert_125_message(&out, &["/nonexistent/python"]);
        }
    }
}

#[test]
fn bad_input_run_missing_workspace_dir() {
    let out = Job::new("print(1)")
        .workspace("/nonexistent/prims-test-ws")
        .raw()
        .run_raw();
    assert_125_message(&out, &["/nonexistent/prims-test-ws"]);
    assert!(!std::path::Path::new("/nonexistent/prims-test-ws").exists());
}

// --------------------------------------------- kernel features turned off

#[test]
fn bad_input_cgroup_backend_none_uses_rlimits() {
    let run = Job::new("print('ran')")
        .policy("[limits]\nwall_time = \"10s\"\n[cgroup]\nbackend = \"none\"\n")
        .run();
    run.assert_ok();
    assert_eq!(run.stdout(), "ran\n");
    assert_eq!(
        run.json["enforced"]["memory"],
        "rlimit",
        "{}",
        run.describe()
    );
    assert_eq!(run.json["enforced"]["cgroup"], "none", "{}", run.describe());
    // Pair: the default on this host is a real cgroup.
    let dflt = Job::new("print('ran')").run();
    dflt.assert_ok();
    assert_ne!(
        dflt.json["enforced"]["cgroup"],
        "none",
        "{}",
        dflt.describe()
    );
}

#[test]
fn bad_input_landlock_not_required_still_runs() {
    let run = Job::new("print('ran')")
        .policy("[limits]\nwall_time = \"10s\"\n[landlock]\nrequired = false\n")
        .run();
    run.assert_ok();
    assert_eq!(run.stdout(), "ran\n");
}

// ----------------------------------------------------- jailer, directly

fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two fds that we then own.
    let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(r, 0, "pipe2: {}", std::io::Error::last_os_error());
    // SAFETY: fresh fds from pipe2.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

/// Runs `prims-jailer --spec-fd 3 --outcome-fd 4` with `spec` on fd 3 (a
/// pipe) and a pipe on fd 4; returns the process result and what it wrote to
/// fd 4.
fn jailer_with_spec(spec: Vec<u8>) -> (RawOutput, Vec<u8>) {
    require_root();
    let (spec_r, spec_w) = pipe();
    let (out_r, out_w) = pipe();
    let spec_fd = spec_r.as_raw_fd();
    let out_fd = out_w.as_raw_fd();
    let mut cmd = Command::new(jailer_bin());
    cmd.args(["--spec-fd", "3", "--outcome-fd", "4"])
        .stdin(Stdio::null());
    // SAFETY: only dup2/fcntl, which are async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            // Move both out of the way first so dup2 onto 3/4 cannot clobber.
            let a = libc::fcntl(spec_fd, libc::F_DUPFD, 10);
            let b = libc::fcntl(out_fd, libc::F_DUPFD, 10);
            if a < 0 || b < 0 || libc::dup2(a, 3) < 0 || libc::dup2(b, 4) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::close(a);
            libc::close(b);
            Ok(())
        });
    }
    let writer = std::thread::spawn(move || {
        let mut f = std::fs::File::from(spec_w);
        let _ = f.write_all(&spec);
    });
    let reader = std::thread::spawn(move || {
        let mut f = std::fs::File::from(out_r);
        let mut v = Vec::new();
        let _ = f.read_to_end(&mut v);
        v
    });
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    drop(spec_r);
    drop(out_w);
    let _ = writer.join();
    let outcome = reader.join().unwrap();
    (out, outcome)
}

fn assert_jailer_setup_error(spec: Vec<u8>, what: &str) -> serde_json::Value {
    let (out, outcome) = jailer_with_spec(spec);
    no_panic(&out);
    let v: serde_json::Value = serde_json::from_slice(outcome.trim_ascii()).unwrap_or_else(|e| {
        panic!(
            "{what}: fd 4 holds no JSON outcome ({e}): {:?}\n{}",
            String::from_utf8_lossy(&outcome),
            out.describe()
        )
    });
    assert_eq!(v["status"], "setup_error", "{what}: {v}");
    assert!(
        v["setup_error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{what}: a setup_error message: {v}"
    );
    // The brief's contract: a refused spec makes the jailer exit non-zero.
    assert!(
        out.code.is_some() && out.code != Some(0),
        "{what}: the jailer wrote a setup_error outcome ({v}) but exited {:?}; expected non-zero:\n{}",
        out.code,
        out.describe()
    );
    v
}

#[test]
fn bad_input_jailer_garbage_spec_setup_error() {
    assert_jailer_setup_error(b"\x00\xffthis is not json {{{".to_vec(), "garbage");
}

#[test]
fn bad_input_jailer_empty_spec_setup_error() {
    assert_jailer_setup_error(Vec::new(), "empty");
}

#[test]
fn bad_input_jailer_wrong_schema_spec_setup_error() {
    assert_jailer_setup_error(
        br#"{"interpreter": 5, "code": ["x"], "unexpected": true}"#.to_vec(),
        "wrong schema",
    );
}

#[test]
fn bad_input_jailer_oversized_spec_setup_error() {
    let mut big = b"{\"code\": \"".to_vec();
    big.resize(5 << 20, b'a');
    big.extend_from_slice(b"\"}");
    assert_jailer_setup_error(big, "oversized");
}

/// A well-formed spec that asks to map jail uid 1000 to host root must be
/// refused before anything runs. Pair: the same spec with an unprivileged
/// host uid runs the code.
#[test]
fn bad_input_jailer_refuses_host_uid_0() {
    let venv = prims_tests::jail_spec::bare_venv();
    let spec_for = |ws: &std::path::Path, uid: u32| {
        prims_tests::jail_spec::job_spec()
            .venv(venv.path())
            .workspace(ws)
            .code("open('/workspace/ran', 'w').write('yes')")
            .output_bytes(65536)
            .host_id(uid)
            .build()
    };
    // Pair: with host uid 200000 the spec is valid and the code runs.
    let ok_ws = workspace_dir();
    std::os::unix::fs::chown(ok_ws.path(), Some(200_000), Some(200_000)).unwrap();
    let (out, outcome) =
        jailer_with_spec(serde_json::to_vec(&spec_for(ok_ws.path(), 200_000)).unwrap());
    no_panic(&out);
    let v: serde_json::Value = serde_json::from_slice(outcome.trim_ascii()).unwrap_or_default();
    assert_eq!(
        v["status"],
        "ok",
        "pairing: a valid spec runs: {v}\n{}",
        out.describe()
    );
    assert!(
        ok_ws.path().join("ran").exists(),
        "pairing: the code ran: {v}"
    );

    let ws = workspace_dir();
    let v = assert_jailer_setup_error(
        serde_json::to_vec(&spec_for(ws.path(), 0)).unwrap(),
        "host_uid 0",
    );
    assert!(
        !ws.path().join("ran").exists(),
        "the code ran as host root: {v}"
    );
}
