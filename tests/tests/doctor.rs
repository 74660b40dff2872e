//! `prims doctor` on this host: every check passes or warns here, and a
//! broken policy is reported with a fix.

use prims_tests::{prims_bin, require_root, unique};
use std::process::Command;

#[test]
fn doctor_passes_on_this_host_and_names_each_check() {
    require_root();
    let state = std::env::temp_dir().join(unique("doctor"));
    let out = Command::new(prims_bin())
        .args(["doctor", "--state-dir"])
        .arg(&state)
        .output()
        .expect("prims doctor");
    let text = String::from_utf8_lossy(&out.stdout);
    let _ = std::fs::remove_dir_all(&state);
    assert!(out.status.success(), "{text}");
    for check in [
        "kernel",
        "user namespaces",
        "Landlock ABI",
        "cgroups:",
        "seccomp",
        "interpreter 3.11",
        "state dir",
    ] {
        assert!(
            text.lines()
                .any(|l| l.starts_with("ok   ") && l.contains(check)),
            "{check}:\n{text}"
        );
    }
}

#[test]
fn doctor_reports_a_missing_interpreter_with_a_fix() {
    require_root();
    let dir = std::env::temp_dir().join(unique("doctor-bad"));
    std::fs::create_dir_all(&dir).unwrap();
    let policy = dir.join("policy.toml");
    std::fs::write(
        &policy,
        "[filesystem]\ninterpreters = { \"3.11\" = \"/nonexistent/python3.11\" }\n",
    )
    .unwrap();
    let out = Command::new(prims_bin())
        .args(["doctor", "--policy"])
        .arg(&policy)
        .arg("--state-dir")
        .arg(dir.join("state"))
        .output()
        .expect("prims doctor");
    let text = String::from_utf8_lossy(&out.stdout);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("FAIL interpreter 3.11: /nonexistent/python3.11 does not exist"),
        "{text}"
    );
    assert!(text.contains("fix: install it"), "{text}");
}
