//! The mount and file calls the jail is built with, each failure named with
//! its path: binds, mount attributes, tmpfs, and the directories, files and
//! links they need.

use crate::error::JailError;
use crate::sys::{self, MOUNT_ATTR_NODEV, MOUNT_ATTR_NOSUID, MOUNT_ATTR_RDONLY};
use nix::errno::Errno;
use nix::mount::{mount, MsFlags};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

fn cpath(p: &Path) -> Result<CString, JailError> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| JailError::Spec(format!("path {} contains a NUL byte", p.display())))
}

pub fn mkdir_p(p: &Path) -> Result<(), JailError> {
    std::fs::create_dir_all(p).map_err(|e| JailError::Mkdir {
        path: p.display().to_string(),
        errno: Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
    })
}

pub fn touch(p: &Path) -> Result<(), JailError> {
    if let Some(parent) = p.parent() {
        mkdir_p(parent)?;
    }
    write_file(p, b"")
}

pub fn write_file(p: &Path, data: &[u8]) -> Result<(), JailError> {
    std::fs::write(p, data).map_err(|e| JailError::WriteFile {
        path: p.display().to_string(),
        errno: Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
    })
}

pub fn bind(src: &str, target: &Path, recursive: bool) -> Result<(), JailError> {
    let mut flags = MsFlags::MS_BIND;
    if recursive {
        flags |= MsFlags::MS_REC;
    }
    mount(Some(src), target, None::<&str>, flags, None::<&str>).map_err(|errno| JailError::Bind {
        src: src.to_string(),
        target: target.display().to_string(),
        errno,
    })
}

pub fn set_attr(target: &Path, attrs: u64, recursive: bool) -> Result<(), JailError> {
    let c = cpath(target)?;
    sys::mount_setattr(&c, attrs, recursive).map_err(|errno| JailError::Remount {
        target: target.display().to_string(),
        errno,
    })
}

pub fn tmpfs(target: &Path, flags: MsFlags, options: &str) -> Result<(), JailError> {
    mount(Some("tmpfs"), target, Some("tmpfs"), flags, Some(options)).map_err(|errno| {
        JailError::MountTmpfs {
            target: target.display().to_string(),
            errno,
        }
    })
}

pub fn symlink(target: &Path, link: &Path) -> Result<(), JailError> {
    std::os::unix::fs::symlink(target, link).map_err(|e| JailError::Symlink {
        path: link.display().to_string(),
        errno: Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
    })
}

/// Read-only, and nothing set-uid or device-like honoured.
pub const RO: u64 = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
