//! cgroup v2: one directory per job under the unified parent.

use crate::error::CgroupError;
use crate::fs;
use crate::job::{JobCgroup, Manager, Version};
use crate::limits::{v2_files, Limits, Need, Usage};
use crate::name::validate_name;
use crate::peak::{self, PeakMeter};
use crate::priority::{self, CpuPriority};
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The key of the parent map in v2 mode.
pub const UNIFIED: &str = "unified";

/// Job manager over a v2 parent directory. It does not check that the
/// directory is on cgroup2 (use [`crate::manager`] for that), so tests can
/// point it at a temporary directory.
#[derive(Debug, Clone)]
pub struct V2Manager {
    parent: PathBuf,
}

impl V2Manager {
    /// Takes the map `{"unified": dir}`.
    pub fn new(parents: &BTreeMap<String, PathBuf>) -> Result<Self, CgroupError> {
        if let Some(k) = parents.keys().find(|k| k.as_str() != UNIFIED) {
            return Err(CgroupError::UnexpectedParent {
                version: "v2",
                key: k.clone(),
            });
        }
        let parent = parents
            .get(UNIFIED)
            .ok_or_else(|| CgroupError::MissingParent {
                version: "v2",
                key: UNIFIED.to_string(),
            })?;
        Ok(V2Manager {
            parent: parent.clone(),
        })
    }

    pub fn parent(&self) -> &Path {
        &self.parent
    }

    /// Create the job cgroup and write no limit at all: for accounting only,
    /// or for a hierarchy without controllers (such as the unified
    /// hierarchy of a hybrid host, used by the tests).
    pub fn create_job_without_limits(&self, name: &str) -> Result<Box<V2Job>, CgroupError> {
        validate_name(name)?;
        let dir = self.parent.join(name);
        match fs::mkdir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Err(CgroupError::JobExists { path: dir })
            }
            Err(source) => return Err(CgroupError::CreateDir { path: dir, source }),
        }
        match fs::open_dir(&dir) {
            Ok(fd) => Ok(Box::new(V2Job { dir, fd })),
            Err(e) => {
                let _ = fs::remove_tree(&dir, Instant::now());
                Err(e)
            }
        }
    }
}

/// Write the v2 limit files into an existing job directory.
pub(crate) fn write_limits(dir: &Path, limits: &Limits) -> Result<(), CgroupError> {
    for (file, value, need) in v2_files(limits) {
        let path = dir.join(file);
        if need == Need::IfPresent && !path.exists() {
            continue;
        }
        fs::write_limit(&path, &value)?;
    }
    Ok(())
}

/// Read the v2 usage files of a job directory.
pub(crate) fn read_usage(dir: &Path) -> Result<Usage, CgroupError> {
    let mut u = Usage::default();
    let peak = dir.join("memory.peak");
    if let Some(t) = fs::read_optional(&peak)? {
        u.memory_peak_bytes = Some(fs::single(&peak, &t)?);
    }
    let current = dir.join("memory.current");
    if let Some(t) = fs::read_optional(&current)? {
        u.memory_current_bytes = Some(fs::single(&current, &t)?);
    }
    let events = dir.join("memory.events");
    if let Some(t) = fs::read_optional(&events)? {
        u.oom_kills = fs::keyed(&events, &t, "oom_kill")?.unwrap_or(0);
    }
    let stat = dir.join("cpu.stat");
    if let Some(t) = fs::read_optional(&stat)? {
        u.cpu_ns = fs::keyed(&stat, &t, "usage_usec")?.map(|us| us.saturating_mul(1000));
    }
    Ok(u)
}

/// `cgroup.kill` (Linux 5.14+), then SIGKILL whatever is still listed until
/// the cgroup is empty. Without `cgroup.kill` the second step does it all.
pub(crate) fn kill_dir(dir: &Path) -> Result<(), CgroupError> {
    let kill = dir.join("cgroup.kill");
    match fs::write_raw(&kill, "1") {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound && dir.is_dir() => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()), // the job is gone
        Err(source) => {
            return Err(CgroupError::WriteFile {
                path: kill,
                value: "1".into(),
                source,
            })
        }
    }
    fs::kill_until_empty(&fs::procs_files(dir))
}

impl Manager for V2Manager {
    fn version(&self) -> Version {
        Version::V2
    }

    fn create_job(&self, name: &str, limits: &Limits) -> Result<Box<dyn JobCgroup>, CgroupError> {
        validate_name(name)?;
        limits.validate()?;
        let job = self.create_job_without_limits(name)?;
        if let Err(e) = write_limits(&job.dir, limits) {
            let _ = fs::remove_tree(&job.dir, Instant::now());
            return Err(e);
        }
        Ok(job)
    }

    fn open_job(&self, name: &str) -> Result<Box<dyn JobCgroup>, CgroupError> {
        validate_name(name)?;
        let dir = self.parent.join(name);
        fs::require_job_dir(&dir)?;
        let fd = fs::open_dir(&dir)?;
        Ok(Box::new(V2Job { dir, fd }))
    }

    fn list_jobs(&self) -> Result<Vec<String>, CgroupError> {
        let mut set = BTreeSet::new();
        fs::list_job_dirs(&self.parent, &mut set)?;
        Ok(set.into_iter().collect())
    }

    fn remove_job(&self, name: &str) -> Result<(), CgroupError> {
        validate_name(name)?;
        let dir = self.parent.join(name);
        kill_dir(&dir)?;
        fs::remove_tree(&dir, Instant::now())
    }
}

/// One v2 job cgroup, with an open fd of its directory.
#[derive(Debug)]
pub struct V2Job {
    dir: PathBuf,
    fd: OwnedFd,
}

impl JobCgroup for V2Job {
    fn attach(&self, pid: libc::pid_t) -> Result<(), CgroupError> {
        fs::write(&self.dir.join("cgroup.procs"), &pid.to_string())
    }

    fn dir_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.fd.as_fd())
    }

    fn usage(&self) -> Result<Usage, CgroupError> {
        read_usage(&self.dir)
    }

    fn set_limits(&self, limits: &Limits) -> Result<(), CgroupError> {
        limits.validate()?;
        write_limits(&self.dir, limits)
    }

    fn start_peak(&self) -> Result<PeakMeter, CgroupError> {
        peak::start_v2(&self.dir)
    }

    fn set_cpu_priority(&self, priority: CpuPriority) -> Result<(), CgroupError> {
        priority::set_v2(&self.dir, priority)
    }

    fn kill(&self) -> Result<(), CgroupError> {
        kill_dir(&self.dir)
    }

    fn destroy(self: Box<Self>) -> Result<(), CgroupError> {
        fs::remove_tree(&self.dir, Instant::now())
    }

    fn enforces_swap(&self) -> bool {
        self.dir.join("memory.swap.max").exists()
    }

    fn paths(&self) -> Vec<PathBuf> {
        vec![self.dir.clone()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs as sfs;

    fn map(p: &Path) -> BTreeMap<String, PathBuf> {
        BTreeMap::from([(UNIFIED.to_string(), p.to_path_buf())])
    }

    #[test]
    fn parent_map_keys() {
        let d = tempfile::tempdir().unwrap();
        assert!(V2Manager::new(&map(d.path())).is_ok());
        let e = V2Manager::new(&BTreeMap::new()).unwrap_err();
        assert!(matches!(e, CgroupError::MissingParent { .. }), "{e}");
        let mut m = map(d.path());
        m.insert("memory".into(), d.path().into());
        let e = V2Manager::new(&m).unwrap_err();
        assert!(matches!(e, CgroupError::UnexpectedParent { .. }), "{e}");
    }

    #[test]
    fn limit_files_written() {
        let d = tempfile::tempdir().unwrap();
        for f in [
            "memory.max",
            "memory.swap.max",
            "memory.oom.group",
            "pids.max",
            "cpu.max",
        ] {
            sfs::write(d.path().join(f), "").unwrap();
        }
        let l = Limits {
            memory_bytes: 1 << 30,
            swap_bytes: 0,
            pids: 100,
            cpu_millis: 500,
        };
        write_limits(d.path(), &l).unwrap();
        let r = |f: &str| sfs::read_to_string(d.path().join(f)).unwrap();
        assert_eq!(r("memory.max"), "1073741824");
        assert_eq!(r("memory.swap.max"), "0");
        assert_eq!(r("memory.oom.group"), "1");
        assert_eq!(r("pids.max"), "100");
        assert_eq!(r("cpu.max"), "50000 100000");
    }

    #[test]
    fn missing_limit_file_is_an_error_but_swap_is_optional() {
        let d = tempfile::tempdir().unwrap();
        for f in ["memory.max", "memory.oom.group", "cpu.max"] {
            sfs::write(d.path().join(f), "").unwrap();
        }
        let e = write_limits(d.path(), &Limits::UNLIMITED).unwrap_err();
        match e {
            CgroupError::LimitFileMissing { path } => assert!(path.ends_with("pids.max")),
            other => panic!("unexpected {other}"),
        }
        assert!(!d.path().join("memory.swap.max").exists());
    }

    #[test]
    fn usage_from_sample_files() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(read_usage(d.path()).unwrap(), Usage::default());
        sfs::write(d.path().join("memory.peak"), "4096\n").unwrap();
        sfs::write(d.path().join("memory.current"), "2048\n").unwrap();
        sfs::write(
            d.path().join("memory.events"),
            "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 1\n",
        )
        .unwrap();
        sfs::write(
            d.path().join("cpu.stat"),
            "usage_usec 2500\nuser_usec 2000\nsystem_usec 500\n",
        )
        .unwrap();
        let u = read_usage(d.path()).unwrap();
        assert_eq!(
            u,
            Usage {
                memory_peak_bytes: Some(4096),
                memory_current_bytes: Some(2048),
                cpu_ns: Some(2_500_000),
                oom_kills: 1
            }
        );
        sfs::write(d.path().join("memory.peak"), "lots\n").unwrap();
        assert!(matches!(
            read_usage(d.path()),
            Err(CgroupError::Parse { .. })
        ));
    }

    #[test]
    fn open_job_then_act_on_it() {
        let d = tempfile::tempdir().unwrap();
        let m = V2Manager::new(&map(d.path())).unwrap();
        assert!(matches!(
            m.open_job("a/b"),
            Err(CgroupError::BadJobName { .. })
        ));
        let e = m.open_job("job").unwrap_err();
        assert!(matches!(e, CgroupError::NoSuchJob { .. }), "{e}");
        assert!(!d.path().join("job").exists(), "never created");
        sfs::write(d.path().join("file"), "").unwrap();
        assert!(matches!(
            m.open_job("file"),
            Err(CgroupError::NoSuchJob { .. })
        ));

        let dir = d.path().join("job");
        sfs::create_dir(&dir).unwrap();
        for f in [
            "memory.max",
            "memory.oom.group",
            "pids.max",
            "cpu.max",
            "cpu.weight",
            "memory.peak",
        ] {
            sfs::write(dir.join(f), "").unwrap();
        }
        let job = m.open_job("job").unwrap();
        assert_eq!(job.paths(), vec![dir.clone()]);
        assert!(job.dir_fd().is_some());
        let r = |f: &str| sfs::read_to_string(dir.join(f)).unwrap();
        let l = Limits {
            memory_bytes: 512 << 20,
            swap_bytes: 0,
            pids: 9,
            cpu_millis: 750,
        };
        job.set_limits(&l).unwrap();
        assert_eq!(r("memory.max"), "536870912");
        assert_eq!(r("pids.max"), "9");
        assert_eq!(r("cpu.max"), "75000 100000");
        assert!(!dir.join("memory.swap.max").exists());
        let e = job.set_limits(&Limits { cpu_millis: 5, ..l }).unwrap_err();
        assert!(matches!(e, CgroupError::BadLimit { .. }), "{e}");
        assert_eq!(r("cpu.max"), "75000 100000", "nothing written");

        job.set_cpu_priority(CpuPriority::Idle).unwrap();
        assert_eq!(r("cpu.weight"), "1");
        let meter = job.start_peak().unwrap();
        assert!(!meter.since_start());
        assert_eq!(r("memory.peak"), "reset");
    }

    #[test]
    fn create_list_remove_in_tempdir() {
        let d = tempfile::tempdir().unwrap();
        let m = V2Manager::new(&map(d.path())).unwrap();
        for bad in ["", "../x", "a/b", ".", "x y"] {
            assert!(matches!(
                m.create_job(bad, &Limits::UNLIMITED),
                Err(CgroupError::BadJobName { .. })
            ));
            assert!(matches!(
                m.remove_job(bad),
                Err(CgroupError::BadJobName { .. })
            ));
        }
        // In a plain directory the limit files are absent: refused, and
        // nothing is left behind.
        let e = m.create_job("j1", &Limits::UNLIMITED).unwrap_err();
        assert!(matches!(e, CgroupError::LimitFileMissing { .. }), "{e}");
        assert!(!d.path().join("j1").exists());

        let job = m.create_job_without_limits("j1").unwrap();
        assert!(job.dir_fd().is_some());
        assert!(matches!(
            m.create_job_without_limits("j1"),
            Err(CgroupError::JobExists { .. })
        ));
        sfs::write(d.path().join("not-a-dir"), "").unwrap();
        sfs::create_dir(d.path().join("bad name")).unwrap();
        assert_eq!(m.list_jobs().unwrap(), vec!["j1"]);
        job.destroy().unwrap();
        assert!(!d.path().join("j1").exists());
        sfs::create_dir(d.path().join("j2")).unwrap();
        m.remove_job("j2").unwrap();
        m.remove_job("j2").unwrap(); // idempotent
        assert!(!d.path().join("j2").exists());
    }
}
