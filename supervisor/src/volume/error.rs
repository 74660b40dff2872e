//! What went wrong with a volume: one variant per step that can fail, each
//! naming the file, device or directory it was working on and carrying
//! what the kernel or the tool said (an errno, an `io::Error`, or an exit
//! status with the tool's own words). The messages are what an admin reads
//! in the log and what a client reads after "the session's workspace is not
//! usable" or "making the build volume".

use nix::errno::Errno;
use std::io;
use std::path::PathBuf;
use std::process::ExitStatus;

#[derive(Debug, thiserror::Error)]
pub(crate) enum VolumeError {
    /// The disk cannot hold the whole image (`fallocate`: ENOSPC or
    /// EDQUOT): nothing was left behind.
    #[error("the disk has no room for {size} more bytes")]
    NoSpace { size: u64 },
    /// The size does not fit an `off_t`.
    #[error("{size} bytes is too large for an image")]
    TooLarge { size: u64 },
    /// `open(O_CREAT | O_EXCL | O_NOFOLLOW)` of a new image file.
    #[error("creating the image file {}: {source}", path.display())]
    CreateImage {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// `fallocate` of the image's blocks, for a reason other than space.
    #[error("reserving the space of the image file {}: {errno}", path.display())]
    Fallocate { path: PathBuf, errno: Errno },
    /// `ftruncate` of a sparse image, where the filesystem cannot allocate
    /// ahead.
    #[error("sizing the image file {}: {source}", path.display())]
    SetLen {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// Walking the tree an image is made from, to size it.
    #[error("measuring {}: {source}", path.display())]
    MeasureTree {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// An e2fsprogs tool (`mke2fs`, `e2fsck`) could not be started.
    #[error("running {tool} (is e2fsprogs installed?): {source}")]
    SpawnTool {
        tool: &'static str,
        #[source]
        source: io::Error,
    },
    /// An e2fsprogs tool ran on `image` and failed; `stderr` is what it said.
    #[error("{tool} failed on {} ({status}): {stderr}", image.display())]
    ToolFailed {
        tool: &'static str,
        image: PathBuf,
        status: ExitStatus,
        stderr: String,
    },
    /// Opening the image as a loop device's backing file.
    #[error("loop device: opening the image file {}: {source}", path.display())]
    OpenBacking {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// Opening `/dev/loop-control`.
    #[error("loop device: /dev/loop-control: {source} (on hosts without loop devices, set sessions.quota = \"none\")")]
    LoopControl {
        #[source]
        source: io::Error,
    },
    /// `ioctl(LOOP_CTL_GET_FREE)` on `/dev/loop-control`.
    #[error(
        "loop device: asking /dev/loop-control for a free device (LOOP_CTL_GET_FREE): {errno}"
    )]
    LoopGetFree { errno: Errno },
    /// Opening the free loop device the kernel named.
    #[error("loop device: opening {}: {source}", device.display())]
    OpenLoop {
        device: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The ioctl `op` (`LOOP_CONFIGURE`, or `LOOP_SET_FD` then
    /// `LOOP_SET_STATUS64` before Linux 5.8) attaching `image` to `device`.
    #[error("loop device: attaching {} to {} ({op}): {errno}", image.display(), device.display())]
    LoopConfigure {
        op: &'static str,
        device: PathBuf,
        image: PathBuf,
        errno: Errno,
    },
    /// Every free device was taken by another process between
    /// `LOOP_CTL_GET_FREE` and its configuration.
    #[error("loop device: every free loop device was taken by others ({tries} tries)")]
    LoopsTaken { tries: u32 },
    /// `mount(2)` of the image's filesystem from its loop device.
    #[error("mounting {} on {}: {errno}", device.display(), dir.display())]
    Mount {
        device: PathBuf,
        dir: PathBuf,
        errno: Errno,
    },
    /// `umount2(UMOUNT_NOFOLLOW)` of the filesystem on `dir`.
    #[error("unmounting {}: {errno}", dir.display())]
    Unmount { dir: PathBuf, errno: Errno },
    /// `umount2(MNT_DETACH)` of a busy filesystem on `dir`.
    #[error("detaching {} (it was busy): {errno}", dir.display())]
    Detach { dir: PathBuf, errno: Errno },
    /// Filesystems kept being found on `dir` after `tries` unmounts.
    #[error("{} is still mounted after {tries} unmounts", dir.display())]
    StillMounted { dir: PathBuf, tries: u32 },
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::errno::Errno;
    use std::path::{Path, PathBuf};

    #[test]
    fn messages_say_what_failed() {
        let cases = [
            (
                VolumeError::NoSpace { size: 4096 },
                "the disk has no room for 4096 more bytes",
            ),
            (
                VolumeError::Mount {
                    device: PathBuf::from("/dev/loop7"),
                    dir: PathBuf::from("/s/w"),
                    errno: Errno::EBUSY,
                },
                "mounting /dev/loop7 on /s/w: EBUSY: Device or resource busy",
            ),
            (
                VolumeError::LoopConfigure {
                    op: "LOOP_SET_FD",
                    device: PathBuf::from("/dev/loop7"),
                    image: PathBuf::from("/s/w.img"),
                    errno: Errno::EINVAL,
                },
                "loop device: attaching /s/w.img to /dev/loop7 (LOOP_SET_FD): EINVAL: Invalid argument",
            ),
            (
                VolumeError::StillMounted {
                    dir: Path::new("/s/w").to_path_buf(),
                    tries: 8,
                },
                "/s/w is still mounted after 8 unmounts",
            ),
        ];
        for (e, want) in cases {
            assert_eq!(e.to_string(), want);
        }
    }
}
