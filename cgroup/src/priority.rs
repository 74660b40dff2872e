//! CPU priority of a job against other cgroups: a warm-pool refill runs
//! idle so that it never slows a running call, and a batch run (a fresh
//! interpreter per program) at a tenth of the default weight, so that a
//! session's call takes the CPU from it without starving it.

use crate::error::CgroupError;
use crate::fs;
use std::io;
use std::path::Path;

/// How a job competes for CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CpuPriority {
    /// CPU only when nothing else wants it.
    Idle,
    /// A tenth of the kernel's default share.
    Batch,
    /// The kernel's default share.
    Normal,
}

impl CpuPriority {
    /// `cpu.weight` (v2): the minimum, a tenth, or the default.
    fn v2_weight(self) -> &'static str {
        match self {
            CpuPriority::Idle => "1",
            CpuPriority::Batch => "10",
            CpuPriority::Normal => "100",
        }
    }

    /// `cpu.shares` (v1): the minimum, a tenth, or the default.
    fn v1_shares(self) -> &'static str {
        match self {
            CpuPriority::Idle => "2",
            CpuPriority::Batch => "102",
            CpuPriority::Normal => "1024",
        }
    }
}

/// v2: `cpu.idle` (Linux 5.15+) for idle, else `cpu.weight`; without
/// `cpu.idle`, idle is the minimum weight.
pub(crate) fn set_v2(dir: &Path, priority: CpuPriority) -> Result<(), CgroupError> {
    let idle = dir.join("cpu.idle");
    let value = if priority == CpuPriority::Idle {
        "1"
    } else {
        "0"
    };
    match fs::write_raw(&idle, value) {
        Ok(()) if priority == CpuPriority::Idle => Ok(()),
        // The weight is ignored while idle, and must be right once not.
        Ok(()) => fs::write_limit(&dir.join("cpu.weight"), priority.v2_weight()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fs::write_limit(&dir.join("cpu.weight"), priority.v2_weight())
        }
        Err(source) => Err(CgroupError::WriteFile {
            path: idle,
            value: value.to_string(),
            source,
        }),
    }
}

/// v1: `cpu.shares` in the job's cpu directory.
pub(crate) fn set_v1(cpu_dir: &Path, priority: CpuPriority) -> Result<(), CgroupError> {
    fs::write_limit(&cpu_dir.join("cpu.shares"), priority.v1_shares())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs as sfs;

    fn read(dir: &Path, f: &str) -> String {
        sfs::read_to_string(dir.join(f)).unwrap()
    }

    #[test]
    fn v2_uses_cpu_idle_where_present() {
        let d = tempfile::tempdir().unwrap();
        sfs::write(d.path().join("cpu.idle"), "").unwrap();
        sfs::write(d.path().join("cpu.weight"), "100").unwrap();
        set_v2(d.path(), CpuPriority::Idle).unwrap();
        assert_eq!(read(d.path(), "cpu.idle"), "1");
        assert_eq!(read(d.path(), "cpu.weight"), "100", "untouched");
        set_v2(d.path(), CpuPriority::Batch).unwrap();
        assert_eq!(read(d.path(), "cpu.idle"), "0");
        assert_eq!(read(d.path(), "cpu.weight"), "10");
        set_v2(d.path(), CpuPriority::Normal).unwrap();
        assert_eq!(read(d.path(), "cpu.idle"), "0");
        assert_eq!(read(d.path(), "cpu.weight"), "100");
    }

    #[test]
    fn v2_falls_back_to_cpu_weight() {
        let d = tempfile::tempdir().unwrap();
        sfs::write(d.path().join("cpu.weight"), "").unwrap();
        set_v2(d.path(), CpuPriority::Idle).unwrap();
        assert_eq!(read(d.path(), "cpu.weight"), "1");
        set_v2(d.path(), CpuPriority::Batch).unwrap();
        assert_eq!(read(d.path(), "cpu.weight"), "10");
        set_v2(d.path(), CpuPriority::Normal).unwrap();
        assert_eq!(read(d.path(), "cpu.weight"), "100");
        assert!(!d.path().join("cpu.idle").exists(), "never created");
    }

    #[test]
    fn v2_without_cpu_controller_names_the_missing_file() {
        let d = tempfile::tempdir().unwrap();
        let e = set_v2(d.path(), CpuPriority::Idle).unwrap_err();
        match &e {
            CgroupError::LimitFileMissing { path } => assert!(path.ends_with("cpu.weight"), "{e}"),
            other => panic!("unexpected {other}"),
        }
        assert_eq!(e.errno(), Some(libc::ENOENT));
    }

    #[test]
    fn v1_cpu_shares() {
        let d = tempfile::tempdir().unwrap();
        let e = set_v1(d.path(), CpuPriority::Idle).unwrap_err();
        assert!(matches!(e, CgroupError::LimitFileMissing { .. }), "{e}");
        sfs::write(d.path().join("cpu.shares"), "1024").unwrap();
        set_v1(d.path(), CpuPriority::Idle).unwrap();
        assert_eq!(read(d.path(), "cpu.shares"), "2");
        set_v1(d.path(), CpuPriority::Batch).unwrap();
        assert_eq!(read(d.path(), "cpu.shares"), "102");
        set_v1(d.path(), CpuPriority::Normal).unwrap();
        assert_eq!(read(d.path(), "cpu.shares"), "1024");
    }
}
