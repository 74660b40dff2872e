//! Attaching an image file to a free loop device with the raw ioctls of
//! linux/loop.h: LOOP_CTL_GET_FREE, then LOOP_CONFIGURE (5.8+), falling back
//! to LOOP_SET_FD + LOOP_SET_STATUS64 on older kernels. The device is
//! autocleared: it detaches itself when its last user (the mount, once we
//! close our fd) goes away, so an unmounted or lazily detached workspace
//! never leaks a loop device.

use super::error::VolumeError;
use nix::errno::Errno;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

const LOOP_SET_FD: libc::c_ulong = 0x4C00;
const LOOP_CLR_FD: libc::c_ulong = 0x4C01;
const LOOP_SET_STATUS64: libc::c_ulong = 0x4C04;
const LOOP_CONFIGURE: libc::c_ulong = 0x4C0A;
const LOOP_CTL_GET_FREE: libc::c_ulong = 0x4C82;
const LO_FLAGS_READ_ONLY: u32 = 1;
const LO_FLAGS_AUTOCLEAR: u32 = 4;
const LO_NAME_SIZE: usize = 64;

/// `struct loop_info64`.
#[repr(C)]
struct LoopInfo64 {
    lo_device: u64,
    lo_inode: u64,
    lo_rdevice: u64,
    lo_offset: u64,
    lo_sizelimit: u64,
    lo_number: u32,
    lo_encrypt_type: u32,
    lo_encrypt_key_size: u32,
    lo_flags: u32,
    lo_file_name: [u8; LO_NAME_SIZE],
    lo_crypt_name: [u8; LO_NAME_SIZE],
    lo_encrypt_key: [u8; 32],
    lo_init: [u64; 2],
}

/// `struct loop_config`.
#[repr(C)]
struct LoopConfig {
    fd: u32,
    block_size: u32,
    info: LoopInfo64,
    reserved: [u64; 8],
}

/// A configured loop device. Keep it until the filesystem on it is mounted:
/// dropping it closes our fd, and with autoclear an unused device detaches.
pub(super) struct LoopDevice {
    pub path: PathBuf,
    _dev: File,
}

fn info(image: &Path, read_only: bool) -> LoopInfo64 {
    let mut name = [0u8; LO_NAME_SIZE];
    let bytes = image.as_os_str().as_encoded_bytes();
    let n = bytes.len().min(LO_NAME_SIZE - 1);
    name[..n].copy_from_slice(&bytes[..n]);
    LoopInfo64 {
        lo_device: 0,
        lo_inode: 0,
        lo_rdevice: 0,
        lo_offset: 0,
        lo_sizelimit: 0,
        lo_number: 0,
        lo_encrypt_type: 0,
        lo_encrypt_key_size: 0,
        lo_flags: LO_FLAGS_AUTOCLEAR | if read_only { LO_FLAGS_READ_ONLY } else { 0 },
        lo_file_name: name,
        lo_crypt_name: [0; LO_NAME_SIZE],
        lo_encrypt_key: [0; 32],
        lo_init: [0; 2],
    }
}

fn open_rw(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(path)
}

/// Attaches `image` to a free loop device, read-only if asked.
pub(super) fn attach(image: &Path, read_only: bool) -> Result<LoopDevice, VolumeError> {
    let backing = if read_only {
        OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
            .open(image)
    } else {
        open_rw(image)
    }
    .map_err(|source| VolumeError::OpenBacking {
        path: image.to_path_buf(),
        source,
    })?;
    let control = open_rw(Path::new("/dev/loop-control"))
        .map_err(|source| VolumeError::LoopControl { source })?;
    // Another process may take the device between GET_FREE and our
    // configure (EBUSY); ask again.
    const TRIES: u32 = 32;
    for _ in 0..TRIES {
        // SAFETY: LOOP_CTL_GET_FREE takes no argument and returns a number.
        let n = unsafe { libc::ioctl(control.as_raw_fd(), LOOP_CTL_GET_FREE) };
        if n < 0 {
            return Err(VolumeError::LoopGetFree {
                errno: Errno::last(),
            });
        }
        let path = PathBuf::from(format!("/dev/loop{n}"));
        let dev = open_rw(&path).map_err(|source| VolumeError::OpenLoop {
            device: path.clone(),
            source,
        })?;
        match configure(&dev, &backing, image, read_only) {
            Ok(()) => return Ok(LoopDevice { path, _dev: dev }),
            Err((_, Errno::EBUSY)) => continue,
            Err((op, errno)) => {
                return Err(VolumeError::LoopConfigure {
                    op,
                    device: path,
                    image: image.to_path_buf(),
                    errno,
                })
            }
        }
    }
    Err(VolumeError::LoopsTaken { tries: TRIES })
}

/// Attaches `backing` to `dev`; on failure, the ioctl that failed and why.
fn configure(
    dev: &File,
    backing: &File,
    image: &Path,
    read_only: bool,
) -> Result<(), (&'static str, Errno)> {
    let config = LoopConfig {
        fd: backing.as_raw_fd() as u32,
        block_size: 0,
        info: info(image, read_only),
        reserved: [0; 8],
    };
    // SAFETY: `config` is a fully initialized struct loop_config that lives
    // across the call; the kernel only reads it.
    let r = unsafe {
        libc::ioctl(
            dev.as_raw_fd(),
            LOOP_CONFIGURE,
            &config as *const LoopConfig,
        )
    };
    if r == 0 {
        return Ok(());
    }
    let e = Errno::last();
    if !matches!(e, Errno::EINVAL | Errno::ENOTTY) {
        return Err(("LOOP_CONFIGURE", e));
    }
    // Kernels before 5.8: two steps.
    // SAFETY: LOOP_SET_FD takes the backing fd as its integer argument.
    if unsafe {
        libc::ioctl(
            dev.as_raw_fd(),
            LOOP_SET_FD,
            backing.as_raw_fd() as libc::c_ulong,
        )
    } < 0
    {
        return Err(("LOOP_SET_FD", Errno::last()));
    }
    let status = info(image, read_only);
    // SAFETY: `status` is a fully initialized struct loop_info64 that lives
    // across the call; the kernel only reads it.
    let r = unsafe {
        libc::ioctl(
            dev.as_raw_fd(),
            LOOP_SET_STATUS64,
            &status as *const LoopInfo64,
        )
    };
    if r < 0 {
        let e = Errno::last();
        // SAFETY: LOOP_CLR_FD takes no argument; undoes our LOOP_SET_FD.
        unsafe { libc::ioctl(dev.as_raw_fd(), LOOP_CLR_FD) };
        return Err(("LOOP_SET_STATUS64", e));
    }
    Ok(())
}
