//! Real cgroup v2 tests of a live job, as a supervisor acts on the job a
//! jailer made: reopen it, change its limits, measure one call's peak
//! memory, change its CPU priority. They need root and a cgroup2 mount.
//!
//! Limits need the memory, pids and cpu controllers in the job's parent.
//! This hybrid host's unified hierarchy has none, so here the tests check
//! how each operation fails without them. The VM check
//! (`tests/vm/cgroup-v2.sh`, a systemd host with cgroup v2) sets
//! `PRIMS_CGROUP_TEST_V2_PARENT` to a delegated cgroup that enables them
//! (a test process cannot: the no-internal-processes rule keeps its own
//! cgroup from enabling controllers), and there the tests check the
//! kernel's figures.

mod common;

use common::v2::*;
use common::*;
use prims_cgroup::*;
use std::collections::BTreeMap;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const PARENT_ENV: &str = "PRIMS_CGROUP_TEST_V2_PARENT";

/// Where a test makes its job.
struct Place {
    m: Box<dyn Manager>,
    parent: PathBuf,
    job: String,
    /// Whether the parent enables memory, pids and cpu for its jobs.
    controllers: bool,
    // Last field: dropped after everything else.
    _cleanup: CgroupCleanup,
}

impl Place {
    fn new(tag: &str) -> Place {
        require_root();
        let (parent, job, cleanup) = match std::env::var_os(PARENT_ENV) {
            Some(p) => {
                let parent = PathBuf::from(p);
                let job = unique(tag);
                let cleanup = CgroupCleanup(vec![parent.join(&job)]);
                (parent, job, cleanup)
            }
            None => {
                let (parent, cleanup) = v2_parent(tag);
                (parent, "job".to_string(), cleanup)
            }
        };
        let controllers = wanted_controllers_enabled(&parent);
        assert!(
            controllers || std::env::var_os(PARENT_ENV).is_none(),
            "{PARENT_ENV}={} must enable {V2_REQUIRED:?} in its cgroup.subtree_control",
            parent.display()
        );
        let parents = BTreeMap::from([(UNIFIED.to_string(), parent.clone())]);
        Place {
            m: manager(Version::V2, &parents).expect("manager v2"),
            parent,
            job,
            controllers,
            _cleanup: cleanup,
        }
    }

    /// The job as the jailer makes it: with limits where the controllers
    /// allow them.
    fn create(&self) -> Box<dyn JobCgroup> {
        if self.controllers {
            self.m.create_job(&self.job, &START).expect("create_job")
        } else {
            let parents = BTreeMap::from([(UNIFIED.to_string(), self.parent.clone())]);
            V2Manager::new(&parents)
                .unwrap()
                .create_job_without_limits(&self.job)
                .expect("create_job_without_limits")
        }
    }

    fn dir(&self) -> PathBuf {
        self.parent.join(&self.job)
    }

    fn read(&self, file: &str) -> String {
        read_trim(&self.dir().join(file))
    }
}

/// (major, minor) of the running kernel.
fn kernel() -> (u32, u32) {
    let r = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut it = r.split(['.', '-']).map(|x| x.trim().parse().unwrap_or(0));
    (it.next().unwrap_or(0), it.next().unwrap_or(0))
}

fn inode(fd: std::os::fd::BorrowedFd<'_>) -> u64 {
    let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
    // SAFETY: fd is open for the duration; st is writable and sized for stat.
    assert_eq!(unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) }, 0);
    // SAFETY: fstat succeeded.
    unsafe { st.assume_init() }.st_ino
}

fn missing_file(e: &CgroupError) -> &Path {
    match e {
        CgroupError::LimitFileMissing { path } => path,
        other => panic!("unexpected {other}"),
    }
}

#[test]
fn v2_open_job_acts_on_the_created_job_and_refuses_a_missing_one() {
    let p = Place::new("open");
    let e = p.m.open_job(&p.job).unwrap_err();
    match &e {
        CgroupError::NoSuchJob { path } => assert_eq!(*path, p.dir()),
        other => panic!("unexpected {other}"),
    }
    assert_eq!(e.errno(), Some(libc::ENOENT));
    assert!(!p.dir().exists(), "open_job created it");

    let created = p.create();
    let opened = p.m.open_job(&p.job).expect("open_job");
    assert_eq!(opened.paths(), created.paths());
    let fd = opened.dir_fd().expect("v2 has a dir fd");
    assert_eq!(inode(fd), std::fs::metadata(p.dir()).unwrap().ino());
    let mut kid = Kid::spawn(Command::new("sleep").arg("30"));
    created.attach(kid.pid()).expect("attach");
    let u = opened.usage().expect("usage");
    assert_eq!(u.memory_current_bytes.is_some(), p.controllers, "{u:?}");
    opened.kill().expect("kill through the opened job");
    assert_sigkilled(kid.wait_for(Duration::from_secs(5)));
    created.destroy().expect("destroy");
    assert!(matches!(
        p.m.open_job(&p.job),
        Err(CgroupError::NoSuchJob { .. })
    ));
}

#[test]
fn v2_set_limits_and_cpu_priority() {
    let p = Place::new("limits");
    let created = p.create();
    let job = p.m.open_job(&p.job).expect("open_job");
    if !p.controllers {
        let e = job.set_limits(&START).unwrap_err();
        assert!(missing_file(&e).ends_with("memory.max"), "{e}");
        let e = job.set_cpu_priority(CpuPriority::Idle).unwrap_err();
        assert!(missing_file(&e).ends_with("cpu.weight"), "{e}");
        assert!(!p.dir().join("cpu.idle").exists(), "never created");
        created.destroy().expect("destroy");
        return;
    }
    let check = |mem: &str, pids: &str, cpu: &str| {
        assert_eq!(p.read("memory.max"), mem);
        assert_eq!(p.read("pids.max"), pids);
        assert_eq!(p.read("cpu.max"), cpu);
        assert_eq!(p.read("memory.oom.group"), "1");
    };
    check("268435456", "32", "50000 100000");
    job.set_limits(&Limits {
        memory_bytes: 512 << 20,
        swap_bytes: 0,
        pids: 100,
        cpu_millis: 1500,
    })
    .expect("raise");
    check("536870912", "100", "150000 100000");
    job.set_limits(&LOWER).expect("lower");
    check("33554432", "8", "25000 100000");
    if job.enforces_swap() {
        assert_eq!(p.read("memory.swap.max"), "0");
    }
    job.set_limits(&Limits::UNLIMITED).expect("unlimited");
    check("max", "max", "max 100000");

    let has_idle = p.dir().join("cpu.idle").exists();
    assert_eq!(has_idle, kernel() >= (5, 15), "cpu.idle came in 5.15");
    let (file, idle, normal) = if has_idle {
        ("cpu.idle", "1", "0")
    } else {
        ("cpu.weight", "1", "100")
    };
    job.set_cpu_priority(CpuPriority::Idle).expect("idle");
    assert_eq!(p.read(file), idle);
    job.set_cpu_priority(CpuPriority::Normal).expect("normal");
    assert_eq!(p.read(file), normal);
    assert_eq!(p.read("cpu.weight"), "100");
    created.destroy().expect("destroy");
}

#[test]
fn v2_peak_per_call_or_the_lifetime_fallback() {
    let p = Place::new("peak");
    let created = p.create();
    let job = p.m.open_job(&p.job).expect("open_job");
    if !p.controllers {
        let meter = job.start_peak().expect("start_peak");
        assert_eq!(meter.read().unwrap(), None);
        assert!(!meter.since_start());
        let u = job.usage().unwrap();
        assert_eq!((u.memory_peak_bytes, u.memory_current_bytes), (None, None));
        created.destroy().expect("destroy");
        return;
    }
    let (mut kid, mut out) = peak_child_after_free(created.as_ref(), job.as_ref());

    let meter = job.start_peak().expect("start_peak");
    // Linux 6.12 made memory.peak writable, with a reset per open file.
    let resets = kernel() >= (6, 12);
    assert_eq!(meter.since_start(), !resets, "kernel {:?}", kernel());
    let first = meter.read().unwrap().expect("peak");
    kid.go();
    out.expect("holding");
    let second = meter.read().unwrap().expect("peak");
    if resets {
        assert!(first < 32 * MIB, "peak after reset {first}");
        assert!(
            (32 * MIB..64 * MIB).contains(&second),
            "peak since the reset {second}: the 32 MiB only, not the earlier 64"
        );
    } else {
        assert!(first >= 64 * MIB, "lifetime peak {first}");
        assert!(second >= first, "{second} < {first}");
    }
    kid.go();
    assert!(kid.wait_for(Duration::from_secs(30)).success());
    created.destroy().expect("destroy");
}
