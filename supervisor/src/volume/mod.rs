//! Volumes: an ext4 image file loop-mounted on a directory with
//! nosuid,nodev,noatime. Session workspaces and environment builds write
//! into them, so a full volume gets ENOSPC instead of filling the host.
//!
//! Every block of an image is allocated when it is made (`fallocate`), and
//! its loop device refuses discards, so no `fstrim` can hand blocks back:
//! a volume's size is a reservation on the host's disk, never an overcommit.
//!
//! Not noexec: the jail runs arbitrary code by design, so refusing execve
//! or PROT_EXEC mmap of workspace files would stop legitimate work (a
//! compiled helper, an extension module written there) without taking any
//! power away from the code; the supervisor itself never executes workspace
//! files. nosuid and nodev do matter and the jailer's bind keeps them.
//!
//! The image file lives outside the volume, so the kernel's ext4 driver
//! only ever parses a filesystem mke2fs made, never bytes from jailed code.

mod error;
mod loopdev;

pub(crate) use error::VolumeError;

use nix::errno::Errno;
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use std::fs::OpenOptions;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

/// Makes `image` (which must not exist): `size` bytes, all allocated,
/// holding an ext4 filesystem with no journal (volumes are scratch space;
/// a restart runs e2fsck instead), no reserved blocks, no resize inode, and
/// its root directory owned by `uid`. On failure the file is removed.
pub(crate) fn create(image: &Path, size: u64, uid: u32) -> Result<(), VolumeError> {
    reserved_file(image, size)?;
    let made = mkfs(image, uid);
    if made.is_err() {
        let _ = std::fs::remove_file(image);
    }
    made
}

/// A new image file of `size` bytes, all allocated; nothing is left when
/// that fails.
fn reserved_file(image: &Path, size: u64) -> Result<(), VolumeError> {
    let f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(image)
        .map_err(|source| VolumeError::CreateImage {
            path: image.to_path_buf(),
            source,
        })?;
    let reserved = reserve(&f, image, size);
    drop(f);
    if reserved.is_err() {
        let _ = std::fs::remove_file(image);
    }
    reserved
}

/// Allocates every block of the file (at `path`) up front.
fn reserve(f: &std::fs::File, path: &Path, size: u64) -> Result<(), VolumeError> {
    let len = libc::off_t::try_from(size).map_err(|_| VolumeError::TooLarge { size })?;
    // SAFETY: fallocate on a file descriptor we own; no memory is passed.
    if unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, len) } == 0 {
        return Ok(());
    }
    match Errno::last() {
        Errno::ENOSPC | Errno::EDQUOT => Err(VolumeError::NoSpace { size }),
        Errno::EOPNOTSUPP => {
            // Some filesystems (overlayfs on a few container hosts) cannot
            // allocate ahead; the image is sparse there, and says so.
            tracing::warn!("this filesystem cannot reserve volume space (fallocate); images are sparse and the disk may be overcommitted");
            f.set_len(size).map_err(|source| VolumeError::SetLen {
                path: path.to_path_buf(),
                source,
            })
        }
        errno => Err(VolumeError::Fallocate {
            path: path.to_path_buf(),
            errno,
        }),
    }
}

fn mkfs(image: &Path, uid: u32) -> Result<(), VolumeError> {
    let ext = format!("root_owner={uid}:{uid},nodiscard,lazy_itable_init=1");
    let mut cmd = Command::new(tool("mke2fs"));
    cmd.args(["-t", "ext4", "-q", "-F", "-m", "0"])
        .args(["-O", "^has_journal,^resize_inode", "-E", &ext])
        .arg(image);
    run(cmd, "mke2fs", image).map(|_| ())
}

/// Makes `image` (which must not exist) holding a copy of the tree `src`,
/// written by mke2fs itself (`-d`), so the copy needs no mount: sized to
/// fit with some room, allocated in full, never written again. Returns the
/// image's size. Ownership and modes are copied as they are; symlinks stay
/// symlinks.
pub(crate) fn create_from_dir(image: &Path, src: &Path) -> Result<u64, VolumeError> {
    let (bytes, inodes) = tree_size(src).map_err(|source| VolumeError::MeasureTree {
        path: src.to_path_buf(),
        source,
    })?;
    let mut size = (bytes + bytes / 5 + inodes * 512 + (8 << 20)).next_multiple_of(1 << 20);
    let inodes = (inodes + 256).to_string();
    let mut attempt = 0;
    loop {
        reserved_file(image, size)?;
        let mut cmd = Command::new(tool("mke2fs"));
        // 4 KiB blocks: a venv is mostly small files, and mke2fs fills a
        // 4K-block filesystem from a tree about 40% faster than a 1K one.
        cmd.args([
            "-t", "ext4", "-q", "-F", "-m", "0", "-b", "4096", "-N", &inodes,
        ])
        .args(["-O", "^has_journal,^resize_inode", "-E", "nodiscard"])
        .arg("-d")
        .arg(src)
        .arg(image);
        match run(cmd, "mke2fs", image) {
            Ok(_) => return Ok(size),
            Err(e) => {
                let _ = std::fs::remove_file(image);
                if attempt == 2 {
                    return Err(e);
                }
                tracing::info!(size, error = %e, "the image was too small; trying a larger one");
                size *= 2;
                attempt += 1;
            }
        }
    }
}

/// Bytes in 4 KiB blocks, and inodes, that the tree at `dir` needs.
fn tree_size(dir: &Path) -> std::io::Result<(u64, u64)> {
    let (mut bytes, mut inodes) = (4096u64, 1u64);
    for ent in std::fs::read_dir(dir)? {
        let ent = ent?;
        let m = std::fs::symlink_metadata(ent.path())?;
        inodes += 1;
        if m.is_dir() {
            let (b, i) = tree_size(&ent.path())?;
            bytes += b;
            inodes += i - 1;
        } else {
            bytes += m.len().next_multiple_of(4096).max(4096);
        }
    }
    Ok((bytes, inodes))
}

/// Checks an image before mounting it again after a restart: e2fsck -p
/// returns at once for a cleanly unmounted filesystem and repairs what it
/// safely can otherwise (exit 1: errors fixed). 4 and up is unusable.
pub(crate) fn check(image: &Path) -> Result<(), VolumeError> {
    let mut cmd = Command::new(tool("e2fsck"));
    cmd.arg("-p").arg(image);
    run(cmd, "e2fsck", image).map(|_| ())
}

/// Mounts `image` on the directory `dir` through a loop device.
pub(crate) fn mount_on(image: &Path, dir: &Path) -> Result<(), VolumeError> {
    mount_image(image, dir, false)
}

/// Mounts `image` read-only (device and filesystem) on `dir`.
pub(crate) fn mount_read_only(image: &Path, dir: &Path) -> Result<(), VolumeError> {
    mount_image(image, dir, true)
}

fn mount_image(image: &Path, dir: &Path, read_only: bool) -> Result<(), VolumeError> {
    let dev = loopdev::attach(image, read_only)?;
    refuse_discards(&dev.path);
    let mut flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOATIME;
    if read_only {
        flags |= MsFlags::MS_RDONLY;
    }
    mount(Some(&dev.path), dir, Some("ext4"), flags, None::<&str>).map_err(|errno| {
        VolumeError::Mount {
            device: dev.path.clone(),
            dir: dir.to_path_buf(),
            errno,
        }
    })?;
    // The mount now holds the device; dropping ours lets autoclear work.
    drop(dev);
    Ok(())
}

/// Discards would punch holes in the image and give its reserved blocks
/// back to the host (`fstrim` trims every mounted filesystem).
fn refuse_discards(dev: &Path) {
    let Some(name) = dev.file_name() else { return };
    let knob = Path::new("/sys/block")
        .join(name)
        .join("queue/discard_max_bytes");
    if let Err(e) = std::fs::write(&knob, "0") {
        tracing::warn!(knob = %knob.display(), error = %e, "could not turn off discards on a volume; fstrim may give its reserved space back");
    }
}

/// Unmounts everything stacked on `dir`. A busy filesystem is detached
/// lazily: gone from here at once, freed (with its loop device) when its
/// last user closes it.
pub(crate) fn unmount(dir: &Path) -> Result<(), VolumeError> {
    const TRIES: u32 = 8;
    for _ in 0..TRIES {
        if !crate::fsops::is_mount_point(dir) {
            return Ok(());
        }
        match umount2(dir, MntFlags::UMOUNT_NOFOLLOW) {
            Ok(()) | Err(Errno::EINVAL) => {}
            Err(Errno::EBUSY) => {
                tracing::warn!(dir = %dir.display(), "workspace busy; detaching it lazily");
                umount2(dir, MntFlags::UMOUNT_NOFOLLOW | MntFlags::MNT_DETACH).map_err(
                    |errno| VolumeError::Detach {
                        dir: dir.to_path_buf(),
                        errno,
                    },
                )?;
            }
            Err(errno) => {
                return Err(VolumeError::Unmount {
                    dir: dir.to_path_buf(),
                    errno,
                })
            }
        }
    }
    Err(VolumeError::StillMounted {
        dir: dir.to_path_buf(),
        tries: TRIES,
    })
}

/// The absolute path of an e2fsprogs tool, so PATH does not matter.
fn tool(name: &str) -> String {
    for dir in ["/usr/sbin", "/sbin", "/usr/bin", "/bin"] {
        let p = format!("{dir}/{name}");
        if Path::new(&p).exists() {
            return p;
        }
    }
    name.to_string()
}

/// Runs the e2fsprogs tool `name` on `image`; its exit code when it did
/// what was asked.
fn run(mut cmd: Command, name: &'static str, image: &Path) -> Result<i32, VolumeError> {
    let out = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .output()
        .map_err(|source| VolumeError::SpawnTool { tool: name, source })?;
    let code = out.status.code().unwrap_or(-1);
    // e2fsck: 1 = errors corrected, 2 = corrected, reboot advised (root fs).
    let ok = code == 0 || (name == "e2fsck" && (code == 1 || code == 2));
    if ok {
        return Ok(code);
    }
    Err(VolumeError::ToolFailed {
        tool: name,
        image: image.to_path_buf(),
        status: out.status,
        stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_step_names_its_file_and_the_errno() {
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("missing/x.img");
        let e = create(&image, 1 << 20, 0).unwrap_err();
        assert!(
            matches!(&e, VolumeError::CreateImage { path, source }
                if *path == image && source.raw_os_error() == Some(libc::ENOENT)),
            "{e:?}"
        );
        let text = e.to_string();
        assert!(text.starts_with("creating the image file "), "{text}");
        assert!(text.contains(&*image.to_string_lossy()), "{text}");
    }
}
