//! Room on the host for copies of a workspace that land on the host's own
//! filesystem (checkpoints, under the state directory; branches and
//! rollbacks of plain-directory workspaces, `sessions.quota = "none"`):
//! free bytes beyond `sessions.min_free_disk`, and free inodes beyond a
//! reserve. A copy into a quota image needs none: the image was reserved
//! whole when its session was made, and its own blocks and inodes bound
//! the copy.

use crate::fsops::{self, CopyLimits, FsError};
use prims_protocol::wire::{ErrorCode, ErrorReply};
use std::path::Path;

/// The least a filesystem keeps of free inodes; see [`inode_reserve`].
const MIN_FREE_INODES: u64 = 65_536;

/// Inodes no copy takes of a filesystem with `files` inodes in all: 5% of
/// them, and at least 65,536.
///
/// An ext4 filesystem's inode table is fixed when it is made; once it is
/// used up, every new file fails with "no space left" however many bytes
/// are free: new sessions' metadata and history, environment builds, the
/// supervisor's own state and, on most hosts, the host's other work, which
/// shares the filesystem. Bytes keep `sessions.min_free_disk` for that;
/// inodes keep this. A fraction grows with the filesystem, like the 5% of
/// blocks ext4 keeps for root by default so that the system goes on when
/// users fill the disk; the floor, a default 1 GiB workspace's inodes
/// (65,536, mke2fs's 16 KiB each), keeps a small filesystem usable.
fn inode_reserve(files: u64) -> u64 {
    (files / 20).max(MIN_FREE_INODES)
}

/// What the filesystem of `dir` can give copies: its free bytes less
/// `keep`, its free inodes less [`inode_reserve`] (unbounded where it has
/// no inode table to use up: btrfs reports none). Nothing when statvfs
/// fails.
fn host_room(dir: &Path, keep: u64) -> (CopyLimits, Free) {
    let Ok(s) = nix::sys::statvfs::statvfs(dir) else {
        return (CopyLimits::from(Free::default()), Free::default());
    };
    let free = Free {
        bytes: s.blocks_available().saturating_mul(s.fragment_size()),
        inodes: s.files_available(),
        keep,
        keep_inodes: if s.files() == 0 {
            None
        } else {
            Some(inode_reserve(s.files()))
        },
    };
    (CopyLimits::from(free), free)
}

/// A filesystem's free bytes and inodes, and what it keeps of them.
#[derive(Debug, Default, Clone, Copy)]
struct Free {
    bytes: u64,
    inodes: u64,
    keep: u64,
    /// None: no inode table to use up.
    keep_inodes: Option<u64>,
}

impl From<Free> for CopyLimits {
    fn from(f: Free) -> CopyLimits {
        CopyLimits {
            max_bytes: f.bytes.saturating_sub(f.keep),
            max_inodes: match f.keep_inodes {
                Some(k) => f.inodes.saturating_sub(k),
                None => u64::MAX,
            },
        }
    }
}

/// Refuses `copies` copies of the workspace `ws` into the filesystem of
/// `dir` (for `what`: "a checkpoint", "a fork") when, judging by what the
/// workspace holds now, that filesystem cannot hold them beside what it
/// keeps; else each copy's share of its room, to bound the copy by (the
/// workspace's processes may write on while it runs). Blocking.
pub(super) fn room_on_host(
    ws: &Path,
    dir: &Path,
    keep: u64,
    (copies, what): (u64, &str),
) -> Result<CopyLimits, ErrorReply> {
    let need = fsops::disk_usage(ws);
    let (room, free) = host_room(dir, keep);
    let n = copies.max(1);
    let share = CopyLimits {
        max_bytes: room.max_bytes / n,
        max_inodes: room.max_inodes / n,
    };
    let times = if n > 1 {
        format!(", {n} times")
    } else {
        String::new()
    };
    if need.bytes > share.max_bytes {
        return Err(quota(format!(
            "not enough disk for {what}: the session holds {} bytes{times}, the host has {} \
             free and keeps {keep} (sessions.min_free_disk)",
            need.bytes, free.bytes
        )));
    }
    if need.inodes > share.max_inodes {
        return Err(quota(format!(
            "not enough inodes for {what}: the session holds {} files, directories and \
             links{times}, the state directory's filesystem has {} inodes free and keeps {} \
             (5% of its inodes, at least {MIN_FREE_INODES})",
            need.inodes,
            free.inodes,
            free.keep_inodes.unwrap_or(0)
        )));
    }
    Ok(share)
}

/// The room on the host for a copy into the plain directory `dir` (a
/// workspace without a quota image); no bound when `dir` is an image's
/// mount point. Blocking.
pub(super) fn unless_image(dir: &Path, keep: u64) -> CopyLimits {
    if fsops::is_mount_point(dir) {
        CopyLimits::ANY
    } else {
        host_room(dir, keep).0
    }
}

/// A checkpoint's copy that did not fit: which budget (`by`: the keys
/// whose room was least, for bytes and inodes) it would have passed.
pub(super) fn budget_refused(e: &FsError, (bytes_by, inodes_by): (&str, &str)) -> ErrorReply {
    match e {
        FsError::TooLarge { max, .. } => quota(format!(
            "the checkpoint would pass its byte budget ({max} bytes left of {bytes_by}); \
             nothing was kept"
        )),
        FsError::TooManyInodes { max, .. } => quota(format!(
            "the checkpoint would pass its inode budget ({max} files, directories and links \
             left of {inodes_by}); nothing was kept"
        )),
        FsError::NoSpace(_) => {
            quota("the host's disk filled while the checkpoint was copied; nothing was kept".into())
        }
        FsError::TooMany { .. } => quota(format!(
            "the session's files cannot be copied: {e}; nothing was kept"
        )),
        e => super::replies::internal(format!("copying the session's files: {e}")),
    }
}

/// What the state directory's filesystem keeps: named when its room, not
/// a budget, bounds a checkpoint.
const HOST_KEEPS: &str =
    "the state directory's free disk and inodes beside what it keeps (sessions.min_free_disk)";

/// A checkpoint's limits: its budgets' `room` (bound by the keys `by`,
/// for bytes and inodes) or the `host`'s, whichever is less, and what
/// bounds each.
pub(super) fn within(
    (room, by): (CopyLimits, (&'static str, &'static str)),
    host: CopyLimits,
) -> (CopyLimits, (&'static str, &'static str)) {
    let pick = |host_less: bool, key| if host_less { HOST_KEEPS } else { key };
    let by = (
        pick(host.max_bytes < room.max_bytes, by.0),
        pick(host.max_inodes < room.max_inodes, by.1),
    );
    (room.min(host), by)
}

fn quota(message: String) -> ErrorReply {
    ErrorReply {
        code: ErrorCode::Quota,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::mount::{mount, umount2, MntFlags, MsFlags};

    /// A tmpfs of `inodes` inodes mounted on a new directory, unmounted
    /// when dropped.
    struct Tmpfs(tempfile::TempDir);

    impl Tmpfs {
        fn new(inodes: u64) -> Tmpfs {
            let dir = tempfile::tempdir().unwrap();
            let opts = format!("size=64m,nr_inodes={inodes},mode=0700");
            mount(
                Some("tmpfs"),
                dir.path(),
                Some("tmpfs"),
                MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
                Some(opts.as_str()),
            )
            .expect("mounting a tmpfs (the tests run as root)");
            Tmpfs(dir)
        }
    }

    impl Drop for Tmpfs {
        fn drop(&mut self) {
            let _ = umount2(self.0.path(), MntFlags::MNT_DETACH);
        }
    }

    /// A workspace of `n` empty files: `n` inodes and no data.
    fn workspace(n: usize) -> tempfile::TempDir {
        let ws = tempfile::tempdir().unwrap();
        for i in 0..n {
            std::fs::write(ws.path().join(format!("f{i}")), b"").unwrap();
        }
        ws
    }

    #[test]
    fn a_copy_the_free_inodes_cannot_hold_beside_the_reserve_is_refused() {
        // 70,000 inodes keep 65,536: room for some 4,400 more.
        let fs = Tmpfs::new(70_000);
        let many = workspace(5_000);
        let e = room_on_host(many.path(), fs.0.path(), 0, (1, "a checkpoint")).unwrap_err();
        assert_eq!(e.code, ErrorCode::Quota);
        assert!(
            e.message.contains("not enough inodes for a checkpoint")
                && e.message.contains("5000 files"),
            "{}",
            e.message
        );
        let few = workspace(2_000);
        let share = room_on_host(few.path(), fs.0.path(), 0, (1, "a checkpoint")).unwrap();
        assert!((2_000..4_500).contains(&share.max_inodes), "{share:?}");
        // Two copies of it do not fit.
        let e = room_on_host(few.path(), fs.0.path(), 0, (3, "a fork")).unwrap_err();
        assert!(e.message.contains("3 times"), "{}", e.message);
    }

    #[test]
    fn a_copy_the_free_bytes_cannot_hold_beside_min_free_disk_is_refused() {
        let fs = Tmpfs::new(100_000);
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("data"), vec![1u8; 1 << 20]).unwrap();
        let keep = (63 << 20) + (512 << 10);
        let e = room_on_host(ws.path(), fs.0.path(), keep, (1, "a checkpoint")).unwrap_err();
        assert!(
            e.message.contains("not enough disk for a checkpoint"),
            "{}",
            e.message
        );
        assert!(room_on_host(ws.path(), fs.0.path(), 0, (1, "a checkpoint")).is_ok());
    }
}
