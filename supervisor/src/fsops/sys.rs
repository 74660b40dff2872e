//! The few raw syscalls the path operations need: `openat2` with resolve
//! flags, and a directory reader on an fd we already hold.

use nix::errno::Errno;
use std::ffi::{CStr, CString, OsStr};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

/// Stay beneath the starting directory (absolute symlinks and `..` above it
/// fail with EXDEV), never through /proc magic links, never across a mount.
pub(super) const BENEATH: u64 =
    libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS | libc::RESOLVE_NO_XDEV;
/// `BENEATH`, and no symlink at all (ELOOP): for writes and for walks.
pub(super) const NO_LINKS: u64 = BENEATH | libc::RESOLVE_NO_SYMLINKS;

/// `struct open_how` of linux/openat2.h (libc's is non-exhaustive).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// openat2(2) relative to `dir`; O_CLOEXEC is always added. EAGAIN (a
/// concurrent rename seen during a `..` walk) and EINTR are retried.
pub(super) fn openat2(
    dir: BorrowedFd<'_>,
    path: &CStr,
    flags: i32,
    mode: u32,
    resolve: u64,
) -> Result<OwnedFd, Errno> {
    let how = OpenHow {
        flags: (flags | libc::O_CLOEXEC) as u32 as u64,
        mode: u64::from(mode),
        resolve,
    };
    let mut tries = 0;
    loop {
        // SAFETY: `path` is a valid NUL-terminated string and `how` a fully
        // initialized open_how of the size we pass; both outlive the call.
        // The kernel only reads them.
        let r = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir.as_raw_fd(),
                path.as_ptr(),
                &how as *const OpenHow,
                std::mem::size_of::<OpenHow>(),
            )
        };
        if r >= 0 {
            // SAFETY: a successful openat2 returns a new fd that nothing else
            // owns.
            return Ok(unsafe { OwnedFd::from_raw_fd(r as i32) });
        }
        let e = Errno::last();
        tries += 1;
        if !(e == Errno::EINTR || e == Errno::EAGAIN) || tries > 16 {
            return Err(e);
        }
    }
}

/// A NUL-free string as a C string (callers have rejected NUL already).
pub(super) fn cstr(s: &str) -> Result<CString, Errno> {
    CString::new(s).map_err(|_| Errno::EINVAL)
}

/// The entries of an open directory, without `.` and `..`; at most `max`
/// of them, then `true` when more were left unread.
pub(super) fn read_dir(dir: BorrowedFd<'_>, max: usize) -> Result<(Vec<CString>, bool), Errno> {
    // A duplicate for the DIR* to own (closedir closes it). It shares the
    // directory offset with `dir`, hence the rewind below.
    let dup = dir.try_clone_to_owned().map_err(|_| Errno::last())?;
    let raw = dup.as_raw_fd();
    // SAFETY: `raw` is a valid directory fd; on success the DIR* owns it, so
    // we forget the OwnedFd to avoid a double close.
    let dirp = unsafe { libc::fdopendir(raw) };
    if dirp.is_null() {
        return Err(Errno::last());
    }
    std::mem::forget(dup);
    // SAFETY: rewinding a valid DIR* that we own.
    unsafe { libc::rewinddir(dirp) };
    let mut out = Vec::new();
    let mut more = false;
    let result = loop {
        Errno::clear();
        // SAFETY: dirp is a valid DIR* used by this thread only.
        let ent = unsafe { libc::readdir64(dirp) };
        if ent.is_null() {
            let e = Errno::last();
            break if e as i32 == 0 { Ok(()) } else { Err(e) };
        }
        // SAFETY: readdir64 returned a valid dirent64 whose d_name is
        // NUL-terminated; we copy it before the next readdir call.
        let name = unsafe { CStr::from_ptr((*ent).d_name.as_ptr()) };
        let bytes = name.to_bytes();
        if bytes != b"." && bytes != b".." {
            if out.len() == max {
                more = true;
                break Ok(());
            }
            out.push(name.to_owned());
        }
    };
    // SAFETY: dirp is valid and closed exactly once; this closes its fd.
    unsafe { libc::closedir(dirp) };
    result.map(|()| (out, more))
}

/// A directory entry name for people (lossy for names that are not UTF-8).
pub(super) fn display(name: &CStr) -> String {
    OsStr::from_bytes(name.to_bytes())
        .to_string_lossy()
        .into_owned()
}

/// Nanoseconds since the epoch from a stat's seconds and nanoseconds.
pub(super) fn ns(sec: i64, nsec: i64) -> i128 {
    i128::from(sec) * 1_000_000_000 + i128::from(nsec)
}
