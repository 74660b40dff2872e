//! Real cgroup v1 tests of a live job, as a supervisor acts on the job a
//! jailer made: reopen it, change its limits, measure one call's peak
//! memory, change its CPU priority. They need root on a v1/hybrid host.

mod common;

use common::v1::*;
use common::*;
use prims_cgroup::*;
use std::process::Command;
use std::time::Duration;

/// What `memory.limit_in_bytes` reads when unlimited (4 KiB pages).
const V1_UNLIMITED: &str = "9223372036854771712";

#[test]
fn v1_open_job_acts_on_the_created_job_and_refuses_a_missing_one() {
    let s = setup("open");
    let e = s.m.open_job("job").unwrap_err();
    match &e {
        CgroupError::NoSuchJob { path } => assert_eq!(*path, s.parents["memory"].join("job")),
        other => panic!("unexpected {other}"),
    }
    assert_eq!(e.errno(), Some(libc::ENOENT));
    assert!(s.m.list_jobs().unwrap().is_empty(), "open_job created {e}");

    let created = s.m.create_job("job", &START).expect("create_job");
    let opened = s.m.open_job("job").expect("open_job");
    assert_eq!(opened.paths(), created.paths());
    let mut kid = Kid::spawn(Command::new("sleep").arg("30"));
    created.attach(kid.pid()).expect("attach");
    assert!(opened
        .usage()
        .expect("usage")
        .memory_current_bytes
        .is_some());
    opened.kill().expect("kill through the opened job");
    assert_sigkilled(kid.wait_for(Duration::from_secs(5)));

    // Gone from one hierarchy: refused, naming it, and not recreated.
    let pids_dir = s.parents["pids"].join("job");
    std::fs::remove_dir(&pids_dir).expect("rmdir the empty pids cgroup");
    match s.m.open_job("job").unwrap_err() {
        CgroupError::NoSuchJob { path } => assert_eq!(path, pids_dir),
        other => panic!("unexpected {other}"),
    }
    assert!(!pids_dir.exists());
    created.destroy().expect("destroy");
}

#[test]
fn v1_set_limits_up_and_down() {
    let s = setup("limits");
    let created = s.m.create_job("job", &START).expect("create_job");
    let job = s.m.open_job("job").expect("open_job");
    let read = |ctl: &str, f: &str| read_trim(&job_file(&s, ctl, "job", f));
    let check = |mem: &str, memsw: &str, pids: &str, quota: &str| {
        assert_eq!(read("memory", "memory.limit_in_bytes"), mem);
        assert_eq!(read("memory", "memory.memsw.limit_in_bytes"), memsw);
        assert_eq!(read("pids", "pids.max"), pids);
        assert_eq!(read("cpu", "cpu.cfs_period_us"), "100000");
        assert_eq!(read("cpu", "cpu.cfs_quota_us"), quota);
    };
    check("268435456", "268435456", "32", "50000");

    // Up, with swap: memory+swap must make room before memory.
    job.set_limits(&Limits {
        memory_bytes: 512 << 20,
        swap_bytes: 64 << 20,
        pids: 100,
        cpu_millis: 1500,
    })
    .expect("raise");
    check("536870912", "603979776", "100", "150000");

    // Down: memory must go first.
    job.set_limits(&LOWER).expect("lower");
    check("33554432", "33554432", "8", "25000");

    job.set_limits(&Limits::UNLIMITED).expect("unlimited");
    check(V1_UNLIMITED, V1_UNLIMITED, "max", "-1");
    job.set_limits(&START).expect("back from unlimited");
    check("268435456", "268435456", "32", "50000");

    let e = job
        .set_limits(&Limits {
            memory_bytes: 0,
            ..START
        })
        .unwrap_err();
    assert!(matches!(e, CgroupError::BadLimit { .. }), "{e}");
    check("268435456", "268435456", "32", "50000");
    created.destroy().expect("destroy");
}

#[test]
fn v1_lowering_memory_below_usage_fails_with_ebusy() {
    let s = setup("ebusy");
    let created = s.m.create_job("job", &START).expect("create_job");
    let job = s.m.open_job("job").expect("open_job");
    let mut kid = Kid::spawn(Command::new(python()).args([
        "-c",
        "import sys\nsys.stdin.readline()\nb = b'\\1' * (64 << 20)\nprint('holding', flush=True)\nsys.stdin.readline()",
    ]));
    let mut out = Lines::of(&mut kid);
    created.attach(kid.pid()).expect("attach");
    kid.go();
    out.expect("holding");
    let held = job.usage().unwrap().memory_current_bytes.expect("current");
    assert!(held >= 64 * MIB, "held {held}");

    let e = job
        .set_limits(&Limits {
            memory_bytes: 16 << 20,
            ..START
        })
        .unwrap_err();
    assert_eq!(e.errno(), Some(libc::EBUSY), "{e}");
    match &e {
        CgroupError::WriteFile { path, .. } => assert!(
            path.ends_with("memory.limit_in_bytes")
                || path.ends_with("memory.memsw.limit_in_bytes"),
            "{e}"
        ),
        other => panic!("unexpected {other}"),
    }
    assert!(kid.0.try_wait().unwrap().is_none(), "v1 kills nobody");
    kid.go();
    assert!(kid.wait_for(Duration::from_secs(30)).success());
    created.destroy().expect("destroy");
}

#[test]
fn v1_peak_restarts_at_start_peak() {
    let s = setup("peak");
    let created = s.m.create_job("job", &START).expect("create_job");
    let job = s.m.open_job("job").expect("open_job");
    let (mut kid, mut out) = peak_child_after_free(created.as_ref(), job.as_ref());

    let meter = job.start_peak().expect("start_peak");
    assert!(!meter.since_start());
    let after_reset = meter.read().unwrap().expect("peak");
    assert!(after_reset < 32 * MIB, "peak after reset {after_reset}");
    // v1 resets the cgroup-wide marks: usage() and memory+swap drop too.
    let u = job.usage().unwrap().memory_peak_bytes.expect("peak");
    assert!(u < 32 * MIB, "usage peak after reset {u}");
    let memsw: u64 = read_trim(&job_file(
        &s,
        "memory",
        "job",
        "memory.memsw.max_usage_in_bytes",
    ))
    .parse()
    .unwrap();
    assert!(memsw < 32 * MIB, "memsw peak after reset {memsw}");

    kid.go();
    out.expect("holding");
    let call_peak = meter.read().unwrap().expect("peak");
    assert!(
        (32 * MIB..64 * MIB).contains(&call_peak),
        "peak since the reset {call_peak}: the 32 MiB only, not the earlier 64"
    );
    kid.go();
    assert!(kid.wait_for(Duration::from_secs(30)).success());
    created.destroy().expect("destroy");
}

#[test]
fn v1_cpu_priority_both_ways() {
    let s = setup("prio");
    let created = s.m.create_job("job", &START).expect("create_job");
    let job = s.m.open_job("job").expect("open_job");
    let shares = || read_trim(&job_file(&s, "cpu", "job", "cpu.shares"));
    assert_eq!(shares(), "1024");
    job.set_cpu_priority(CpuPriority::Idle).expect("idle");
    assert_eq!(shares(), "2");
    job.set_cpu_priority(CpuPriority::Normal).expect("normal");
    assert_eq!(shares(), "1024");
    // The bandwidth limit is a separate knob and stays.
    assert_eq!(
        read_trim(&job_file(&s, "cpu", "job", "cpu.cfs_quota_us")),
        "50000"
    );
    created.destroy().expect("destroy");
}
