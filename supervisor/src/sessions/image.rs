//! Quota images: a sparse ext4 file per session, loop-mounted on its
//! workspace directory with nosuid,nodev,noatime.
//!
//! Not noexec: the jail runs arbitrary code by design, so refusing execve
//! or PROT_EXEC mmap of workspace files would stop legitimate work (a
//! compiled helper, an extension module written there) without taking any
//! power away from the code; the supervisor itself never executes workspace
//! files. nosuid and nodev do matter and the jailer's bind keeps them.
//!
//! The image file lives outside the workspace, so the kernel's ext4 driver
//! only ever parses a filesystem mke2fs made, never bytes from jailed code.

use super::loopdev;
use nix::errno::Errno;
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

/// Makes `image` (which must not exist): `size` sparse bytes holding an
/// ext4 filesystem with no journal (workspaces are scratch space; a
/// restart runs e2fsck instead), no reserved blocks, no resize inode, and
/// its root directory owned by `uid`.
pub fn create(image: &Path, size: u64, uid: u32) -> Result<(), String> {
    let f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(image)
        .map_err(|e| format!("creating the image file: {e}"))?;
    f.set_len(size)
        .map_err(|e| format!("sizing the image file: {e}"))?;
    drop(f);
    let ext = format!("root_owner={uid}:{uid},nodiscard,lazy_itable_init=1");
    let mut cmd = Command::new(tool("mke2fs"));
    cmd.args(["-t", "ext4", "-q", "-F", "-m", "0"])
        .args(["-O", "^has_journal,^resize_inode", "-E", &ext])
        .arg(image);
    run(cmd, "mke2fs").map(|_| ())
}

/// Checks an image before mounting it again after a restart: e2fsck -p
/// returns at once for a cleanly unmounted filesystem and repairs what it
/// safely can otherwise (exit 1: errors fixed). 4 and up is unusable.
pub fn check(image: &Path) -> Result<(), String> {
    let mut cmd = Command::new(tool("e2fsck"));
    cmd.arg("-p").arg(image);
    run(cmd, "e2fsck").map(|_| ())
}

/// Mounts `image` on the directory `dir` through a loop device.
pub fn mount_on(image: &Path, dir: &Path) -> Result<(), String> {
    let dev = loopdev::attach(image).map_err(|e| format!("loop device: {e}"))?;
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOATIME;
    mount(Some(&dev.path), dir, Some("ext4"), flags, None::<&str>)
        .map_err(|e| format!("mounting {} on the workspace: {e}", dev.path.display()))?;
    // The mount now holds the device; dropping ours lets autoclear work.
    drop(dev);
    Ok(())
}

/// Unmounts everything stacked on `dir`. A busy filesystem is detached
/// lazily: gone from here at once, freed (with its loop device) when its
/// last user closes it.
pub fn unmount(dir: &Path) -> Result<(), String> {
    for _ in 0..8 {
        if !crate::fsops::is_mount_point(dir) {
            return Ok(());
        }
        match umount2(dir, MntFlags::UMOUNT_NOFOLLOW) {
            Ok(()) | Err(Errno::EINVAL) => {}
            Err(Errno::EBUSY) => {
                tracing::warn!(dir = %dir.display(), "workspace busy; detaching it lazily");
                umount2(dir, MntFlags::UMOUNT_NOFOLLOW | MntFlags::MNT_DETACH)
                    .map_err(|e| format!("detaching the workspace: {e}"))?;
            }
            Err(e) => return Err(format!("unmounting the workspace: {e}")),
        }
    }
    Err("the workspace is still mounted after 8 unmounts".to_string())
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

fn run(mut cmd: Command, name: &str) -> Result<i32, String> {
    let out = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .output()
        .map_err(|e| format!("running {name} (is e2fsprogs installed?): {e}"))?;
    let code = out.status.code().unwrap_or(-1);
    // e2fsck: 1 = errors corrected, 2 = corrected, reboot advised (root fs).
    let ok = code == 0 || (name == "e2fsck" && (code == 1 || code == 2));
    if ok {
        return Ok(code);
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    Err(format!("{name} failed ({}): {}", out.status, stderr.trim()))
}
