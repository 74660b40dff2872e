//! Real cgroup v2 tests. On this hybrid host the unified hierarchy (at
//! /sys/fs/cgroup/unified) has no controllers, but directories,
//! cgroup.procs, cgroup.kill and cgroup.events work. They need root and a
//! cgroup2 mount, and fail without them.

mod common;

use common::v2::*;
use common::*;
use prims_cgroup::*;
use std::collections::BTreeMap;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

#[test]
fn v2_job_attach_kill_destroy() {
    let (parent, _cleanup) = v2_parent("life");
    let parents = BTreeMap::from([(UNIFIED.to_string(), parent.clone())]);
    // The checked constructor accepts the real cgroup2 directory.
    let generic = manager(Version::V2, &parents).expect("manager v2");
    assert_eq!(generic.version(), Version::V2);
    let m = V2Manager::new(&parents).unwrap();

    let job = m.create_job_without_limits("job").expect("create");
    let dir = parent.join("job");
    assert_eq!(job.paths(), vec![dir.clone()]);
    assert_eq!(generic.list_jobs().unwrap(), vec!["job".to_string()]);

    // dir_fd is the job directory, usable for CLONE_INTO_CGROUP.
    let fd = job.dir_fd().expect("v2 has a dir fd");
    let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
    // SAFETY: fd is open for the duration; st is writable and sized for stat.
    assert_eq!(unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) }, 0);
    // SAFETY: fstat succeeded.
    let st = unsafe { st.assume_init() };
    assert_eq!(st.st_ino, std::fs::metadata(&dir).unwrap().ino());
    // SAFETY: fcntl F_GETFD on an open fd.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFD) };
    assert!(flags & libc::FD_CLOEXEC != 0);

    let mut kid = Kid::spawn(Command::new("sleep").arg("30"));
    job.attach(kid.pid()).expect("attach");
    assert_eq!(procs(&dir), vec![kid.pid()]);
    assert!(read_trim(&dir.join("cgroup.events")).contains("populated 1"));
    let u = job.usage().expect("usage");
    assert!(
        u.cpu_ns.is_some(),
        "cpu.stat usage_usec is always there: {u:?}"
    );
    assert_eq!(u.oom_kills, 0);

    assert!(
        dir.join("cgroup.kill").exists(),
        "kernel 5.14+ has cgroup.kill"
    );
    job.kill().expect("kill");
    assert_sigkilled(kid.wait_for(Duration::from_secs(5)));
    assert!(procs(&dir).is_empty());
    assert!(read_trim(&dir.join("cgroup.events")).contains("populated 0"));

    job.destroy().expect("destroy");
    assert!(!dir.exists());
    assert!(m.list_jobs().unwrap().is_empty());
}

#[test]
fn v2_remove_job_kills_a_left_over_job() {
    let (parent, _cleanup) = v2_parent("crash");
    let parents = BTreeMap::from([(UNIFIED.to_string(), parent.clone())]);
    let m = V2Manager::new(&parents).unwrap();
    let job = m.create_job_without_limits("left-over").unwrap();
    let mut kid = Kid::spawn(Command::new("sleep").arg("30"));
    job.attach(kid.pid()).unwrap();
    // A child cgroup inside the job must not block removal.
    std::fs::create_dir(parent.join("left-over/inner")).unwrap();
    drop(job);

    let m2 = manager(Version::V2, &parents).unwrap();
    assert_eq!(m2.list_jobs().unwrap(), vec!["left-over".to_string()]);
    m2.remove_job("left-over").expect("remove_job");
    assert_sigkilled(kid.wait_for(Duration::from_secs(5)));
    assert!(!parent.join("left-over").exists());
    m2.remove_job("left-over").expect("idempotent");
}

#[test]
fn v2_create_job_writes_limits_or_names_the_missing_file() {
    let (parent, _cleanup) = v2_parent("limits");
    let parents = BTreeMap::from([(UNIFIED.to_string(), parent.clone())]);
    let m = manager(Version::V2, &parents).unwrap();
    let limits = Limits {
        memory_bytes: 64 << 20,
        swap_bytes: 0,
        pids: 20,
        cpu_millis: 250,
    };
    if wanted_controllers_enabled(&parent) {
        // A delegated v2 host.
        let job = m.create_job("job", &limits).expect("create_job");
        let d = parent.join("job");
        assert_eq!(read_trim(&d.join("memory.max")), "67108864");
        assert_eq!(read_trim(&d.join("memory.oom.group")), "1");
        assert_eq!(read_trim(&d.join("pids.max")), "20");
        assert_eq!(read_trim(&d.join("cpu.max")), "25000 100000");
        job.destroy().unwrap();
    } else {
        // This hybrid host: no controller in the unified hierarchy. The
        // error names the missing file and the job directory is gone.
        let e = m.create_job("job", &limits).unwrap_err();
        match &e {
            CgroupError::LimitFileMissing { path } => {
                assert!(path.ends_with("job/memory.max"), "{e}")
            }
            other => panic!("unexpected error: {other}"),
        }
        assert!(e.to_string().contains("subtree_control"), "{e}");
        assert!(!parent.join("job").exists());
    }
}

#[test]
fn v2_resolve_parents_enables_controllers_or_explains() {
    require_root();
    let own = own_v2_dir();
    let name = unique("resolve");
    let _cleanup = CgroupCleanup(vec![own.join(&name)]);
    let offered = read_trim(&own.join("cgroup.controllers"));
    let all_offered = V2_REQUIRED
        .iter()
        .all(|c| offered.split_whitespace().any(|x| x == *c));
    match resolve_parents(Version::V2, &format!("{name}/jobs")) {
        Ok(map) => {
            assert!(
                all_offered || wanted_controllers_enabled(&own),
                "unexpected success"
            );
            let dir = &map[UNIFIED];
            assert_eq!(*dir, own.join(&name).join("jobs"));
            assert!(wanted_controllers_enabled(dir));
        }
        Err(e) => {
            let msg = e.to_string();
            // Offered controllers still cannot be enabled in a cgroup that
            // holds processes (this test process sits in `own`): EBUSY.
            assert!(
                !all_offered || msg.contains("EBUSY"),
                "controllers offered, yet: {msg}"
            );
            assert!(matches!(e, CgroupError::NotDelegated { .. }), "{msg}");
            assert!(
                msg.contains("memory") && msg.contains("Delegate=yes"),
                "{msg}"
            );
            assert!(
                !own.join(&name).exists(),
                "a failed resolve left {name} behind"
            );
        }
    }
}

const CHILD_ENV: &str = "PRIMS_CGROUP_TEST_LEAF_PARENT";

/// Runs twice: as the driver (normal test run), and inside a child copy of
/// this test binary that really moves itself (moving the shared test
/// process would disturb the other tests).
#[test]
fn v2_move_self_to_leaf_real() {
    if let Ok(p) = std::env::var(CHILD_ENV) {
        // Child: enter the prepared cgroup P, then move into P/supervisor.
        let p = PathBuf::from(p);
        std::fs::write(p.join("cgroup.procs"), std::process::id().to_string()).unwrap();
        v2_move_self_to_leaf("supervisor").expect("move to leaf");
        v2_move_self_to_leaf("supervisor").expect("second call is a no-op");
        let me = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        let entries = mountinfo::parse_proc_cgroup(&me);
        println!("CHILD-CGROUP {}", mountinfo::own_v2_path(&entries).unwrap());
        // Relative parents now resolve against P, not P/supervisor.
        match resolve_parents(Version::V2, "jobs") {
            Ok(map) => println!("CHILD-RESOLVED {}", map[UNIFIED].display()),
            Err(e) => println!("CHILD-ERROR {e}"),
        }
        return;
    }
    let (parent, _cleanup) = v2_parent("leaf");
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "v2_move_self_to_leaf_real",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &parent)
        .output()
        .expect("run child test binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = |tag: &str| {
        stdout
            .lines()
            .find_map(|l| l.split_once(tag).map(|x| x.1))
            .unwrap_or_else(|| panic!("no {tag} in {stdout}"))
            .to_string()
    };
    let cg = line("CHILD-CGROUP ");
    assert!(
        cg.ends_with(&format!("/{}/supervisor", unique("leaf"))),
        "{cg}"
    );
    assert!(parent.join("supervisor").is_dir());
    if let Some(err) = stdout
        .lines()
        .find_map(|l| l.split_once("CHILD-ERROR ").map(|x| x.1))
    {
        // No controllers here: the explanation, not a wrong path. The
        // boundary is P (the cgroup left), so the hierarchy root above it
        // is reported as outside and left untouched.
        assert!(
            err.contains("Delegate=yes") && err.contains("outside"),
            "{err}"
        );
        assert!(err.contains(&unique("leaf")), "{err}");
        assert!(!parent.join("jobs").exists());
    } else {
        assert_eq!(PathBuf::from(line("CHILD-RESOLVED ")), parent.join("jobs"));
    }
}
