//! cgroup v1: one directory per controller hierarchy for each job. `cpu`
//! and `cpuacct` may share a hierarchy (co-mounted), and then one directory.

use crate::error::CgroupError;
use crate::fs;
use crate::job::{JobCgroup, Manager, Version};
use crate::limits::{v1_files, Limits, Need, Usage, V1Ctl, V1MemoryOrder};
use crate::name::validate_name;
use crate::peak::{self, PeakMeter};
use crate::priority::{self, CpuPriority};
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The keys of the parent map in v1 mode.
pub const V1_CONTROLLERS: [&str; 4] = ["memory", "pids", "cpu", "cpuacct"];

/// One directory per controller (the parents, or one job's).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Dirs {
    memory: PathBuf,
    pids: PathBuf,
    cpu: PathBuf,
    cpuacct: PathBuf,
}

impl Dirs {
    fn join(&self, name: &str) -> Dirs {
        Dirs {
            memory: self.memory.join(name),
            pids: self.pids.join(name),
            cpu: self.cpu.join(name),
            cpuacct: self.cpuacct.join(name),
        }
    }

    /// Each distinct directory once, in a stable order.
    fn unique(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = Vec::with_capacity(4);
        for d in [&self.memory, &self.pids, &self.cpu, &self.cpuacct] {
            if !v.contains(d) {
                v.push(d.clone());
            }
        }
        v
    }

    fn of(&self, ctl: V1Ctl) -> &Path {
        match ctl {
            V1Ctl::Memory => &self.memory,
            V1Ctl::Pids => &self.pids,
            V1Ctl::Cpu => &self.cpu,
        }
    }
}

/// Job manager over v1 parent directories. It does not check that they
/// are on cgroupfs (use [`crate::manager`] for that), so tests can point it
/// at temporary directories.
#[derive(Debug, Clone)]
pub struct V1Manager {
    parents: Dirs,
}

impl V1Manager {
    /// Takes the map `{"memory", "pids", "cpu", "cpuacct"} -> dir`.
    pub fn new(parents: &BTreeMap<String, PathBuf>) -> Result<Self, CgroupError> {
        if let Some(k) = parents
            .keys()
            .find(|k| !V1_CONTROLLERS.contains(&k.as_str()))
        {
            return Err(CgroupError::UnexpectedParent {
                version: "v1",
                key: k.clone(),
            });
        }
        let get = |k: &str| {
            parents
                .get(k)
                .cloned()
                .ok_or_else(|| CgroupError::MissingParent {
                    version: "v1",
                    key: k.to_string(),
                })
        };
        Ok(V1Manager {
            parents: Dirs {
                memory: get("memory")?,
                pids: get("pids")?,
                cpu: get("cpu")?,
                cpuacct: get("cpuacct")?,
            },
        })
    }

    /// The distinct parent directories.
    pub fn parent_dirs(&self) -> Vec<PathBuf> {
        self.parents.unique()
    }
}

/// Write the v1 limit files into existing job directories.
fn write_limits(dirs: &Dirs, limits: &Limits, order: V1MemoryOrder) -> Result<(), CgroupError> {
    for (ctl, file, value, need) in v1_files(limits, order) {
        let path = dirs.of(ctl).join(file);
        if need == Need::IfPresent && !path.exists() {
            continue;
        }
        fs::write_limit(&path, &value)?;
    }
    Ok(())
}

/// Rewrite the limits of a live job, in the order its current memory
/// limit allows.
fn rewrite_limits(dirs: &Dirs, limits: &Limits) -> Result<(), CgroupError> {
    let path = dirs.memory.join("memory.limit_in_bytes");
    let current = fs::single(&path, &fs::read(&path)?)?;
    write_limits(dirs, limits, V1MemoryOrder::for_change(current, limits))
}

fn read_usage(dirs: &Dirs) -> Result<Usage, CgroupError> {
    let mut u = Usage::default();
    let peak = dirs.memory.join("memory.max_usage_in_bytes");
    if let Some(t) = fs::read_optional(&peak)? {
        u.memory_peak_bytes = Some(fs::single(&peak, &t)?);
    }
    let current = dirs.memory.join("memory.usage_in_bytes");
    if let Some(t) = fs::read_optional(&current)? {
        u.memory_current_bytes = Some(fs::single(&current, &t)?);
    }
    let oom = dirs.memory.join("memory.oom_control");
    if let Some(t) = fs::read_optional(&oom)? {
        u.oom_kills = fs::keyed(&oom, &t, "oom_kill")?.unwrap_or(0);
    }
    let cpu = dirs.cpuacct.join("cpuacct.usage");
    if let Some(t) = fs::read_optional(&cpu)? {
        u.cpu_ns = Some(fs::single(&cpu, &t)?);
    }
    Ok(u)
}

fn kill_dirs(dirs: &Dirs) -> Result<(), CgroupError> {
    let files: Vec<PathBuf> = dirs
        .unique()
        .iter()
        .flat_map(|d| fs::procs_files(d))
        .collect();
    fs::kill_until_empty(&files)
}

/// Remove every directory, trying all of them; the first error is returned.
fn remove_dirs(dirs: &Dirs) -> Result<(), CgroupError> {
    let start = Instant::now();
    let mut first = Ok(());
    for d in dirs.unique() {
        let r = fs::remove_tree(&d, start);
        if first.is_ok() {
            first = r;
        }
    }
    first
}

impl Manager for V1Manager {
    fn version(&self) -> Version {
        Version::V1
    }

    fn create_job(&self, name: &str, limits: &Limits) -> Result<Box<dyn JobCgroup>, CgroupError> {
        validate_name(name)?;
        limits.validate()?;
        let dirs = self.parents.join(name);
        let mut created = Vec::new();
        for d in dirs.unique() {
            let err = match fs::mkdir(&d) {
                Ok(()) => {
                    created.push(d);
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    CgroupError::JobExists { path: d }
                }
                Err(source) => CgroupError::CreateDir { path: d, source },
            };
            fs::undo_mkdirs(&created);
            return Err(err);
        }
        if let Err(e) = write_limits(&dirs, limits, V1MemoryOrder::MemoryFirst) {
            let _ = remove_dirs(&dirs);
            return Err(e);
        }
        Ok(Box::new(V1Job { dirs }))
    }

    fn open_job(&self, name: &str) -> Result<Box<dyn JobCgroup>, CgroupError> {
        validate_name(name)?;
        let dirs = self.parents.join(name);
        for d in dirs.unique() {
            fs::require_job_dir(&d)?;
        }
        Ok(Box::new(V1Job { dirs }))
    }

    fn list_jobs(&self) -> Result<Vec<String>, CgroupError> {
        let mut set = BTreeSet::new();
        for d in self.parents.unique() {
            fs::list_job_dirs(&d, &mut set)?;
        }
        Ok(set.into_iter().collect())
    }

    fn remove_job(&self, name: &str) -> Result<(), CgroupError> {
        validate_name(name)?;
        let dirs = self.parents.join(name);
        kill_dirs(&dirs)?;
        remove_dirs(&dirs)
    }
}

/// One v1 job cgroup: a directory in each controller hierarchy.
#[derive(Debug)]
pub struct V1Job {
    dirs: Dirs,
}

impl JobCgroup for V1Job {
    fn attach(&self, pid: libc::pid_t) -> Result<(), CgroupError> {
        let value = pid.to_string();
        for d in self.dirs.unique() {
            fs::write(&d.join("cgroup.procs"), &value)?;
        }
        Ok(())
    }

    fn dir_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    fn usage(&self) -> Result<Usage, CgroupError> {
        read_usage(&self.dirs)
    }

    fn set_limits(&self, limits: &Limits) -> Result<(), CgroupError> {
        limits.validate()?;
        rewrite_limits(&self.dirs, limits)
    }

    fn start_peak(&self) -> Result<PeakMeter, CgroupError> {
        peak::start_v1(&self.dirs.memory)
    }

    fn set_cpu_priority(&self, priority: CpuPriority) -> Result<(), CgroupError> {
        priority::set_v1(&self.dirs.cpu, priority)
    }

    fn kill(&self) -> Result<(), CgroupError> {
        kill_dirs(&self.dirs)
    }

    fn destroy(self: Box<Self>) -> Result<(), CgroupError> {
        remove_dirs(&self.dirs)
    }

    fn enforces_swap(&self) -> bool {
        self.dirs
            .memory
            .join("memory.memsw.limit_in_bytes")
            .exists()
    }

    fn paths(&self) -> Vec<PathBuf> {
        self.dirs.unique()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs as sfs;

    fn parents(root: &Path, comounted: bool) -> BTreeMap<String, PathBuf> {
        let mut m = BTreeMap::new();
        for c in V1_CONTROLLERS {
            let dir = if comounted && c.starts_with("cpu") {
                root.join("cpu,cpuacct/p")
            } else {
                root.join(c).join("p")
            };
            sfs::create_dir_all(&dir).unwrap();
            m.insert(c.to_string(), dir);
        }
        m
    }

    #[test]
    fn parent_map_keys() {
        let d = tempfile::tempdir().unwrap();
        let mut m = parents(d.path(), false);
        assert!(V1Manager::new(&m).is_ok());
        m.remove("cpuacct");
        let e = V1Manager::new(&m).unwrap_err();
        assert!(matches!(e, CgroupError::MissingParent { .. }), "{e}");
        m.insert("unified".into(), d.path().into());
        let e = V1Manager::new(&m).unwrap_err();
        assert!(matches!(e, CgroupError::UnexpectedParent { .. }), "{e}");
    }

    #[test]
    fn comounted_dirs_are_deduplicated() {
        let d = tempfile::tempdir().unwrap();
        let m = V1Manager::new(&parents(d.path(), true)).unwrap();
        assert_eq!(m.parent_dirs().len(), 3);
        let m = V1Manager::new(&parents(d.path(), false)).unwrap();
        assert_eq!(m.parent_dirs().len(), 4);
    }

    /// Pre-create the job dirs and their files, Firecracker-style.
    fn fake_job(root: &Path, comounted: bool, memsw: bool) -> Dirs {
        let p = V1Manager::new(&parents(root, comounted))
            .unwrap()
            .parents
            .join("job");
        for d in p.unique() {
            sfs::create_dir_all(&d).unwrap();
        }
        let mut files = vec![
            (&p.memory, "memory.limit_in_bytes"),
            (&p.pids, "pids.max"),
            (&p.cpu, "cpu.cfs_period_us"),
            (&p.cpu, "cpu.cfs_quota_us"),
        ];
        if memsw {
            files.push((&p.memory, "memory.memsw.limit_in_bytes"));
        }
        for (d, f) in files {
            sfs::write(d.join(f), "").unwrap();
        }
        p
    }

    #[test]
    fn limit_files_written() {
        let d = tempfile::tempdir().unwrap();
        let dirs = fake_job(d.path(), true, true);
        let l = Limits {
            memory_bytes: 32 << 20,
            swap_bytes: 1 << 20,
            pids: 5,
            cpu_millis: 250,
        };
        write_limits(&dirs, &l, V1MemoryOrder::MemoryFirst).unwrap();
        let r = |dir: &Path, f: &str| sfs::read_to_string(dir.join(f)).unwrap();
        assert_eq!(
            r(&dirs.memory, "memory.limit_in_bytes"),
            (32u64 << 20).to_string()
        );
        assert_eq!(
            r(&dirs.memory, "memory.memsw.limit_in_bytes"),
            (33u64 << 20).to_string()
        );
        assert_eq!(r(&dirs.pids, "pids.max"), "5");
        assert_eq!(r(&dirs.cpu, "cpu.cfs_period_us"), "100000");
        assert_eq!(r(&dirs.cpu, "cpu.cfs_quota_us"), "25000");
        assert!(V1Job { dirs: dirs.clone() }.enforces_swap());
    }

    #[test]
    fn memsw_skipped_when_absent() {
        let d = tempfile::tempdir().unwrap();
        let dirs = fake_job(d.path(), false, false);
        write_limits(&dirs, &Limits::UNLIMITED, V1MemoryOrder::MemoryFirst).unwrap();
        assert!(!dirs.memory.join("memory.memsw.limit_in_bytes").exists());
        assert_eq!(
            sfs::read_to_string(dirs.memory.join("memory.limit_in_bytes")).unwrap(),
            "-1"
        );
        assert!(!V1Job { dirs }.enforces_swap());
    }

    #[test]
    fn usage_from_sample_files() {
        let d = tempfile::tempdir().unwrap();
        let dirs = fake_job(d.path(), false, false);
        assert_eq!(read_usage(&dirs).unwrap(), Usage::default());
        sfs::write(dirs.memory.join("memory.max_usage_in_bytes"), "33554432\n").unwrap();
        sfs::write(dirs.memory.join("memory.usage_in_bytes"), "1048576\n").unwrap();
        sfs::write(
            dirs.memory.join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n",
        )
        .unwrap();
        sfs::write(dirs.cpuacct.join("cpuacct.usage"), "987654321\n").unwrap();
        assert_eq!(
            read_usage(&dirs).unwrap(),
            Usage {
                memory_peak_bytes: Some(33554432),
                memory_current_bytes: Some(1048576),
                cpu_ns: Some(987654321),
                oom_kills: 3
            }
        );
        // Old kernels have no oom_kill line.
        sfs::write(
            dirs.memory.join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\n",
        )
        .unwrap();
        assert_eq!(read_usage(&dirs).unwrap().oom_kills, 0);
    }

    #[test]
    fn create_refuses_and_cleans_up_in_tempdir() {
        let d = tempfile::tempdir().unwrap();
        let m = V1Manager::new(&parents(d.path(), false)).unwrap();
        assert!(matches!(
            m.create_job("a/../b", &Limits::UNLIMITED),
            Err(CgroupError::BadJobName { .. })
        ));
        // Plain directories have no limit files: refused, nothing left.
        let e = m.create_job("j", &Limits::UNLIMITED).unwrap_err();
        assert!(matches!(e, CgroupError::LimitFileMissing { .. }), "{e}");
        assert!(m.list_jobs().unwrap().is_empty());
        // A leftover in one hierarchy is reported, and only what this call
        // made is removed.
        sfs::create_dir(m.parents.pids.join("j")).unwrap();
        let e = m.create_job("j", &Limits::UNLIMITED).unwrap_err();
        assert!(matches!(e, CgroupError::JobExists { .. }), "{e}");
        assert!(!m.parents.memory.join("j").exists());
        assert_eq!(m.list_jobs().unwrap(), vec!["j"]);
        m.remove_job("j").unwrap();
        assert!(m.list_jobs().unwrap().is_empty());
    }

    #[test]
    fn open_job_needs_every_directory_and_creates_none() {
        let d = tempfile::tempdir().unwrap();
        let m = V1Manager::new(&parents(d.path(), true)).unwrap();
        assert!(matches!(
            m.open_job("../x"),
            Err(CgroupError::BadJobName { .. })
        ));
        let e = m.open_job("job").unwrap_err();
        assert!(matches!(e, CgroupError::NoSuchJob { .. }), "{e}");
        assert_eq!(e.errno(), Some(libc::ENOENT));
        let dirs = fake_job(d.path(), true, false);
        let job = m.open_job("job").unwrap();
        assert_eq!(job.paths(), dirs.unique());
        // Missing in one hierarchy: refused, naming it, and not recreated.
        sfs::remove_dir_all(&dirs.pids).unwrap();
        match m.open_job("job").unwrap_err() {
            CgroupError::NoSuchJob { path } => assert_eq!(path, dirs.pids),
            other => panic!("unexpected {other}"),
        }
        assert!(!dirs.pids.exists());
        // A file where the directory should be.
        sfs::write(&dirs.pids, "").unwrap();
        assert!(matches!(
            m.open_job("job"),
            Err(CgroupError::NoSuchJob { .. })
        ));
    }

    #[test]
    fn set_limits_on_an_opened_job() {
        let d = tempfile::tempdir().unwrap();
        let dirs = fake_job(d.path(), false, true);
        let m = V1Manager::new(&parents(d.path(), false)).unwrap();
        let job = m.open_job("job").unwrap();
        // The current limit decides the order; plain files cannot show it,
        // the real v1 test does. An unreadable current limit is an error.
        let e = job.set_limits(&Limits::UNLIMITED).unwrap_err();
        assert!(matches!(e, CgroupError::Parse { .. }), "{e}");
        sfs::write(dirs.memory.join("memory.limit_in_bytes"), "67108864\n").unwrap();
        let l = Limits {
            memory_bytes: 128 << 20,
            swap_bytes: 0,
            pids: 7,
            cpu_millis: 2000,
        };
        job.set_limits(&l).unwrap();
        let r = |dir: &Path, f: &str| sfs::read_to_string(dir.join(f)).unwrap();
        assert_eq!(r(&dirs.memory, "memory.limit_in_bytes"), "134217728");
        assert_eq!(r(&dirs.memory, "memory.memsw.limit_in_bytes"), "134217728");
        assert_eq!(r(&dirs.pids, "pids.max"), "7");
        assert_eq!(r(&dirs.cpu, "cpu.cfs_quota_us"), "200000");
        let e = job
            .set_limits(&Limits {
                pids: 0,
                ..Limits::UNLIMITED
            })
            .unwrap_err();
        assert!(matches!(e, CgroupError::BadLimit { .. }), "{e}");
        assert_eq!(r(&dirs.pids, "pids.max"), "7", "nothing written");
    }

    #[test]
    fn destroy_empty_job_dirs() {
        let d = tempfile::tempdir().unwrap();
        let m = V1Manager::new(&parents(d.path(), true)).unwrap();
        let dirs = m.parents.join("job");
        for x in dirs.unique() {
            sfs::create_dir(&x).unwrap();
        }
        let job: Box<dyn JobCgroup> = Box::new(V1Job { dirs: dirs.clone() });
        assert_eq!(job.paths().len(), 3);
        assert!(job.dir_fd().is_none());
        job.kill().unwrap();
        job.destroy().unwrap();
        for x in dirs.unique() {
            assert!(!x.exists());
        }
    }
}
