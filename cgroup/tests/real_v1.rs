//! Real cgroup v1 tests on this host (hybrid: v1 memory, pids, cpu,
//! cpuacct). They need root and fail without it.

mod common;

use common::v1::*;
use common::*;
use prims_cgroup::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

#[test]
fn v1_parents_are_under_the_callers_own_cgroups() {
    let s = setup("own");
    let me = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let entries = mountinfo::parse_proc_cgroup(&me);
    for c in V1_CONTROLLERS {
        let own = mountinfo::own_v1_path(&entries, c).unwrap();
        let dir = &s.parents[c];
        assert!(dir.is_dir(), "{c}: {} was not created", dir.display());
        assert!(dir.ends_with(unique("own")), "{}", dir.display());
        let want_suffix = format!("{}/{}", own.trim_end_matches('/'), unique("own"));
        assert!(
            dir.to_str().unwrap().ends_with(&want_suffix),
            "{c}: {} is not below own cgroup {own}",
            dir.display()
        );
    }
    // Resolving again is idempotent.
    assert_eq!(
        resolve_parents(Version::V1, &unique("own")).unwrap(),
        s.parents
    );
}

#[test]
fn v1_absolute_parent_is_from_the_hierarchy_root() {
    require_root();
    let name = unique("abs");
    let parents = resolve_parents(Version::V1, &format!("/{name}/jobs")).unwrap();
    let tops: Vec<PathBuf> = parents
        .values()
        .map(|d| d.parent().unwrap().to_path_buf())
        .collect();
    let _cleanup = CgroupCleanup(tops);
    assert_eq!(
        parents["memory"],
        Path::new("/sys/fs/cgroup/memory").join(&name).join("jobs")
    );
    assert_eq!(
        parents["pids"],
        Path::new("/sys/fs/cgroup/pids").join(&name).join("jobs")
    );
    for d in parents.values() {
        assert!(d.is_dir());
    }
}

#[test]
fn v1_job_lifecycle() {
    let s = setup("life");
    let limits = Limits {
        memory_bytes: 64 << 20,
        swap_bytes: 0,
        pids: 32,
        cpu_millis: 500,
    };
    let job = s.m.create_job("job", &limits).expect("create_job");
    let mut uniq: Vec<&PathBuf> = s.parents.values().collect();
    uniq.dedup();
    assert_eq!(job.paths().len(), uniq.len());

    // Limits are in place before anything enters.
    assert_eq!(
        read_trim(&job_file(&s, "memory", "job", "memory.limit_in_bytes")),
        "67108864"
    );
    assert!(job.enforces_swap(), "this host has memory.memsw.*");
    assert_eq!(
        read_trim(&job_file(
            &s,
            "memory",
            "job",
            "memory.memsw.limit_in_bytes"
        )),
        "67108864"
    );
    assert_eq!(read_trim(&job_file(&s, "pids", "job", "pids.max")), "32");
    assert_eq!(
        read_trim(&job_file(&s, "cpu", "job", "cpu.cfs_period_us")),
        "100000"
    );
    assert_eq!(
        read_trim(&job_file(&s, "cpu", "job", "cpu.cfs_quota_us")),
        "50000"
    );
    assert!(matches!(
        s.m.create_job("job", &limits),
        Err(CgroupError::JobExists { .. })
    ));
    assert_eq!(s.m.list_jobs().unwrap(), vec!["job".to_string()]);

    let mut kid = Kid::spawn(Command::new("sleep").arg("30"));
    job.attach(kid.pid()).expect("attach");
    for p in job.paths() {
        assert!(
            procs(&p).contains(&kid.pid()),
            "{} lacks the child",
            p.display()
        );
    }
    let u = job.usage().expect("usage");
    assert!(u.cpu_ns.is_some(), "{u:?}");
    assert!(u.memory_peak_bytes.is_some(), "{u:?}");
    assert_eq!(u.oom_kills, 0);

    job.kill().expect("kill");
    assert_sigkilled(kid.wait_for(Duration::from_secs(5)));
    for p in job.paths() {
        assert!(procs(&p).is_empty());
    }
    let paths = job.paths();
    job.destroy().expect("destroy");
    for p in paths {
        assert!(!p.exists(), "{} still exists", p.display());
    }
    assert!(s.m.list_jobs().unwrap().is_empty());
}

#[test]
fn v1_memory_limit_oom_kills() {
    let s = setup("oom");
    let limits = Limits {
        memory_bytes: 32 << 20,
        swap_bytes: 0,
        pids: 16,
        cpu_millis: 1000,
    };
    let job = s.m.create_job("job", &limits).expect("create_job");
    let mut kid = Kid::spawn(Command::new(python()).args([
        "-c",
        "import sys; sys.stdin.readline(); b = b'\\1' * (200 << 20); print('survived', len(b))",
    ]));
    job.attach(kid.pid()).expect("attach");
    kid.go();
    let st = kid.wait_for(Duration::from_secs(30));
    let out = kid.stdout();
    assert_sigkilled(st);
    assert!(!out.contains("survived"), "{out}");
    let u = job.usage().expect("usage");
    assert!(u.oom_kills >= 1, "{u:?}");
    let peak = u.memory_peak_bytes.expect("peak");
    assert!(peak > (16 << 20) && peak <= (33 << 20), "peak {peak}");
    job.kill().unwrap();
    job.destroy().expect("destroy");
}

#[test]
fn v1_pids_limit_makes_fork_fail_with_eagain() {
    let s = setup("pids");
    let limits = Limits {
        memory_bytes: 256 << 20,
        swap_bytes: 0,
        pids: 5,
        cpu_millis: 1000,
    };
    let job = s.m.create_job("job", &limits).expect("create_job");
    let script = "\
import os, sys, time
sys.stdin.readline()
n = 0
try:
    for _ in range(50):
        if os.fork() == 0:
            os.closerange(0, 3)
            time.sleep(30)
            os._exit(0)
        n += 1
    print('no-limit', n, flush=True)
except BlockingIOError as e:
    print('EAGAIN', n, e.errno, flush=True)
";
    let mut kid = Kid::spawn(Command::new(python()).args(["-c", script]));
    job.attach(kid.pid()).expect("attach");
    kid.go();
    let st = kid.wait_for(Duration::from_secs(30));
    let out = kid.stdout();
    assert!(st.success(), "{st:?} {out}");
    let f: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(f.first(), Some(&"EAGAIN"), "fork never failed: {out}");
    let forked: u32 = f[1].parse().unwrap();
    assert!(forked < 5, "{out}");
    assert_eq!(f[2], libc::EAGAIN.to_string());
    let events = read_trim(&job_file(&s, "pids", "job", "pids.events"));
    assert!(events.starts_with("max ") && events != "max 0", "{events}");
    // The forked sleepers are still in the job: kill takes them all.
    let pids_dir = s.parents["pids"].join("job");
    assert!(!procs(&pids_dir).is_empty());
    job.kill().expect("kill");
    assert!(procs(&pids_dir).is_empty());
    job.destroy().expect("destroy");
}

#[test]
fn v1_cpu_quota_is_enforced() {
    let s = setup("cpu");
    let limits = Limits {
        memory_bytes: 256 << 20,
        swap_bytes: 0,
        pids: 16,
        cpu_millis: 100, // a tenth of a core
    };
    let job = s.m.create_job("job", &limits).expect("create_job");
    let mut kid = Kid::spawn(Command::new(python()).args([
        "-c",
        "import sys, time; sys.stdin.readline(); t = time.time()\nwhile time.time() - t < 1.0: pass",
    ]));
    job.attach(kid.pid()).expect("attach");
    let inside = std::time::Instant::now();
    kid.go();
    assert!(kid.wait_for(Duration::from_secs(30)).success());
    let wall = inside.elapsed();
    let cpu = job.usage().unwrap().cpu_ns.expect("cpu_ns");
    // A busy process held to a tenth of a core uses about 10% of the wall
    // time it spends in the job (whatever python still had to do after the
    // attach runs throttled too); unthrottled it would be close to 100%.
    let share = cpu as f64 / wall.as_nanos() as f64;
    assert!(
        cpu > 0 && share < 0.3,
        "cpu_ns {cpu} in {wall:?}: {share:.2} of a core"
    );
    job.destroy().expect("destroy");
}

#[test]
fn v1_crash_cleanup_with_a_fresh_manager() {
    let s = setup("crash");
    let job =
        s.m.create_job("left-over", &Limits::UNLIMITED)
            .expect("create_job");
    let mut kid = Kid::spawn(Command::new("sleep").arg("30"));
    job.attach(kid.pid()).unwrap();
    let paths = job.paths();
    drop(job); // the "jailer" dies without cleaning up

    let m2 = manager(Version::V1, &s.parents).unwrap();
    assert_eq!(m2.list_jobs().unwrap(), vec!["left-over".to_string()]);
    assert!(matches!(
        m2.remove_job("../x"),
        Err(CgroupError::BadJobName { .. })
    ));
    m2.remove_job("left-over").expect("remove_job");
    assert_sigkilled(kid.wait_for(Duration::from_secs(5)));
    for p in paths {
        assert!(!p.exists(), "{}", p.display());
    }
    m2.remove_job("left-over").expect("idempotent");
    assert!(m2.list_jobs().unwrap().is_empty());
}

#[test]
fn v1_bad_limits_and_names_create_nothing() {
    let s = setup("bad");
    let zero_mem = Limits {
        memory_bytes: 0,
        ..Limits::UNLIMITED
    };
    assert!(matches!(
        s.m.create_job("job", &zero_mem),
        Err(CgroupError::BadLimit { .. })
    ));
    for bad in ["", "..", "a/b", "cgroup.procs/x", &"y".repeat(65)] {
        assert!(matches!(
            s.m.create_job(bad, &Limits::UNLIMITED),
            Err(CgroupError::BadJobName { .. })
        ));
    }
    assert!(s.m.list_jobs().unwrap().is_empty());
}
