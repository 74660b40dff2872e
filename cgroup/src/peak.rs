//! Peak memory of a job from a chosen moment on: a live interpreter's job
//! runs many calls, and each call reports its own peak.

use crate::error::CgroupError;
use crate::fs;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The longest peak file text accepted: a u64 and a newline fit in 21.
const MAX_TEXT: usize = 64;

/// Reads the peak memory of one job since [`crate::JobCgroup::start_peak`].
/// It keeps the peak file open: on v2 the reset belongs to that open file.
#[derive(Debug)]
pub struct PeakMeter {
    /// The peak file and its path (for messages); `None` when the kernel
    /// has no peak file for this job.
    file: Option<(File, PathBuf)>,
    since_start: bool,
}

impl PeakMeter {
    /// Peak bytes since `start_peak`, or since the job started when
    /// [`PeakMeter::since_start`] says so. `None` when the kernel keeps no
    /// peak (v2 before Linux 5.19).
    pub fn read(&self) -> Result<Option<u64>, CgroupError> {
        let Some((file, path)) = &self.file else {
            return Ok(None);
        };
        let mut buf = [0u8; MAX_TEXT];
        // Offset 0 each time: kernfs regenerates the text on a read from 0.
        let n = file
            .read_at(&mut buf, 0)
            .map_err(|source| CgroupError::ReadFile {
                path: path.clone(),
                source,
            })?;
        let bad = |what: &str| CgroupError::Parse {
            path: path.clone(),
            what: what.to_string(),
        };
        if n == buf.len() {
            return Err(bad("longer than a number"));
        }
        let text = std::str::from_utf8(&buf[..n]).map_err(|_| bad("not UTF-8"))?;
        fs::single(path, text).map(Some)
    }

    /// True when the kernel could not reset the peak (v2 before Linux
    /// 6.12): [`PeakMeter::read`] then gives the peak over the job's whole
    /// life. False when there is no peak at all.
    pub fn since_start(&self) -> bool {
        self.since_start
    }
}

/// v1: reset the cgroup-wide high-water marks to the current usage.
pub(crate) fn start_v1(memory_dir: &Path) -> Result<PeakMeter, CgroupError> {
    let path = memory_dir.join("memory.max_usage_in_bytes");
    let reset = "0";
    let write_err = |path: &Path, source| CgroupError::WriteFile {
        path: path.to_path_buf(),
        value: reset.to_string(),
        source,
    };
    let mut file = match fs::open_existing(&path, true) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(absent()),
        Err(source) => return Err(write_err(&path, source)),
    };
    file.write_all(reset.as_bytes())
        .map_err(|source| write_err(&path, source))?;
    // Without it, a job with swap would keep its lifetime memory+swap peak.
    let memsw = memory_dir.join("memory.memsw.max_usage_in_bytes");
    match fs::write_raw(&memsw, reset) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(source) => return Err(write_err(&memsw, source)),
    }
    Ok(PeakMeter {
        file: Some((file, path)),
        since_start: false,
    })
}

/// v2: `reset` on our own open file description of `memory.peak`.
pub(crate) fn start_v2(dir: &Path) -> Result<PeakMeter, CgroupError> {
    let path = dir.join("memory.peak");
    let reset = "reset";
    match fs::open_existing(&path, true) {
        Ok(mut file) => {
            // A kernel that takes the open but not the reset still shows
            // the lifetime peak through this file.
            let since_start = !matches!(file.write(reset.as_bytes()), Ok(n) if n == reset.len());
            Ok(PeakMeter {
                file: Some((file, path)),
                since_start,
            })
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(absent()),
        // Before 6.12 memory.peak is read-only: kernfs refuses a writable
        // open with EACCES, even to root.
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EACCES | libc::EPERM | libc::EROFS)
            ) =>
        {
            let file = fs::open_existing(&path, false).map_err(|source| CgroupError::ReadFile {
                path: path.clone(),
                source,
            })?;
            Ok(PeakMeter {
                file: Some((file, path)),
                since_start: true,
            })
        }
        Err(source) => Err(CgroupError::WriteFile {
            path,
            value: reset.to_string(),
            source,
        }),
    }
}

fn absent() -> PeakMeter {
    PeakMeter {
        file: None,
        since_start: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs as sfs;
    use std::os::unix::fs::PermissionsExt;

    fn read(p: &Path) -> String {
        sfs::read_to_string(p).unwrap()
    }

    #[test]
    fn v2_reset_is_written_to_the_kept_file() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("memory.peak");
        sfs::write(&f, "").unwrap();
        let m = start_v2(d.path()).unwrap();
        assert!(!m.since_start());
        assert_eq!(read(&f), "reset");
        // The meter reads its open file, from the start, each time.
        sfs::write(&f, "4096\n").unwrap();
        assert_eq!(m.read().unwrap(), Some(4096));
        sfs::write(&f, "8192\n").unwrap();
        assert_eq!(m.read().unwrap(), Some(8192));
        sfs::write(&f, "max\n").unwrap();
        assert!(matches!(m.read(), Err(CgroupError::Parse { .. })));
        sfs::write(&f, "1".repeat(MAX_TEXT)).unwrap();
        assert!(matches!(m.read(), Err(CgroupError::Parse { .. })));
    }

    /// A kernel before 6.12 refuses the writable open of memory.peak with
    /// EACCES. Root passes any mode check, so the test drops the file
    /// capabilities of one thread (setfsuid is per thread) to get the same
    /// refusal from a read-only file.
    #[test]
    fn v2_refused_reset_falls_back_to_the_lifetime_peak() {
        let d = tempfile::tempdir().unwrap();
        sfs::set_permissions(d.path(), sfs::Permissions::from_mode(0o755)).unwrap();
        let f = d.path().join("memory.peak");
        sfs::write(&f, "123456\n").unwrap();
        sfs::set_permissions(&f, sfs::Permissions::from_mode(0o444)).unwrap();
        let dir = d.path().to_path_buf();
        let m = std::thread::spawn(move || {
            // SAFETY: setfsuid only changes this thread's filesystem ids.
            let old = unsafe { libc::setfsuid(65534) };
            let m = start_v2(&dir);
            // SAFETY: setfsuid only changes this thread's filesystem ids; this
            // restores the previous one.
            unsafe { libc::setfsuid(old as libc::uid_t) };
            m
        })
        .join()
        .unwrap()
        .expect("fallback, not an error");
        assert!(m.since_start());
        assert_eq!(read(&f), "123456\n", "nothing written");
        assert_eq!(m.read().unwrap(), Some(123456));
    }

    #[test]
    fn v2_without_memory_peak_reads_none() {
        let d = tempfile::tempdir().unwrap();
        let m = start_v2(d.path()).unwrap();
        assert_eq!(m.read().unwrap(), None);
        assert!(!m.since_start());
        assert!(!d.path().join("memory.peak").exists(), "never created");
    }

    #[test]
    fn v1_resets_memory_and_memsw_marks() {
        let d = tempfile::tempdir().unwrap();
        let mem = d.path().join("memory.max_usage_in_bytes");
        let memsw = d.path().join("memory.memsw.max_usage_in_bytes");
        sfs::write(&mem, "").unwrap();
        let m = start_v1(d.path()).unwrap();
        assert_eq!(read(&mem), "0");
        assert!(!memsw.exists(), "memsw is optional and never created");
        sfs::write(&mem, "65536\n").unwrap();
        assert_eq!(m.read().unwrap(), Some(65536));
        assert!(!m.since_start());

        sfs::write(&mem, "").unwrap();
        sfs::write(&memsw, "").unwrap();
        start_v1(d.path()).unwrap();
        assert_eq!(read(&mem), "0");
        assert_eq!(read(&memsw), "0");
    }

    #[test]
    fn v1_without_memory_controller_reads_none() {
        let d = tempfile::tempdir().unwrap();
        let m = start_v1(d.path()).unwrap();
        assert_eq!(m.read().unwrap(), None);
    }
}
