//! Thin wrappers for the syscalls that nix does not cover.

use nix::errno::Errno;
use std::ffi::CStr;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

fn check(ret: libc::c_long) -> Result<libc::c_long, Errno> {
    if ret < 0 {
        Err(Errno::last())
    } else {
        Ok(ret)
    }
}

/// `close_range(first, ~0, flags)`.
pub fn close_range(first: u32, flags: u32) -> Result<(), Errno> {
    // SAFETY: close_range only touches this process's fd table.
    check(unsafe { libc::syscall(libc::SYS_close_range, first, u32::MAX, flags) }).map(|_| ())
}

#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

pub const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

pub enum Forked {
    Child,
    Parent { pid: libc::pid_t, pidfd: OwnedFd },
}

/// Fork-like clone into new namespaces, returning a pidfd for the child.
/// With `cgroup`, the child starts inside that cgroup (v2 `CLONE_INTO_CGROUP`).
///
/// Only call this from a single-threaded process: the child continues on a
/// copy of the caller's stack, as after `fork`.
pub fn clone_fork(flags: u64, cgroup: Option<BorrowedFd<'_>>) -> Result<Forked, Errno> {
    let mut pidfd: RawFd = -1;
    let mut args = CloneArgs {
        flags: flags | libc::CLONE_PIDFD as u64,
        pidfd: &mut pidfd as *mut RawFd as u64,
        exit_signal: libc::SIGCHLD as u64,
        ..Default::default()
    };
    if let Some(fd) = cgroup {
        args.flags |= CLONE_INTO_CGROUP;
        args.cgroup = fd.as_raw_fd() as u64;
    }
    // SAFETY: args is a valid clone_args of the size passed; with no stack
    // given, clone3 behaves like fork, which is sound in a single-threaded
    // process.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &mut args as *mut CloneArgs,
            std::mem::size_of::<CloneArgs>(),
        )
    };
    match check(ret) {
        Ok(pid) => Ok(forked(pid, pidfd)),
        Err(Errno::ENOSYS) if cgroup.is_none() => clone_legacy(flags),
        Err(e) => Err(e),
    }
}

fn clone_legacy(flags: u64) -> Result<Forked, Errno> {
    let mut pidfd: RawFd = -1;
    let all = flags | libc::CLONE_PIDFD as u64 | libc::SIGCHLD as u64;
    // SAFETY: raw clone with a null stack acts like fork; CLONE_PIDFD stores
    // the pidfd through the parent_tid pointer, which points at a live local.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_clone,
            all,
            0usize,
            &mut pidfd as *mut RawFd,
            0usize,
            0usize,
        )
    };
    check(ret).map(|pid| forked(pid, pidfd))
}

/// Which side of a successful fork-like clone this is: the child sees pid 0,
/// the parent the child's pid and the pidfd the kernel stored for it.
fn forked(pid: libc::c_long, pidfd: RawFd) -> Forked {
    if pid == 0 {
        return Forked::Child;
    }
    // SAFETY: the kernel returned a new pidfd that nothing else owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    Forked::Parent {
        pid: pid as libc::pid_t,
        pidfd,
    }
}

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

pub const MOUNT_ATTR_RDONLY: u64 = 0x1;
pub const MOUNT_ATTR_NOSUID: u64 = 0x2;
pub const MOUNT_ATTR_NODEV: u64 = 0x4;
pub const MOUNT_ATTR_NOEXEC: u64 = 0x8;

/// Set mount attributes on `path` and, with `recursive`, every mount below.
pub fn mount_setattr(path: &CStr, set: u64, recursive: bool) -> Result<(), Errno> {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let flags = if recursive { libc::AT_RECURSIVE } else { 0 };
    // SAFETY: path is NUL-terminated and attr is a valid mount_attr.
    check(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            flags as libc::c_uint,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    })
    .map(|_| ())
}

pub fn pidfd_send_signal(pidfd: BorrowedFd<'_>, sig: i32) -> Result<(), Errno> {
    // SAFETY: pidfd is a valid pidfd; no siginfo is passed.
    check(unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0u32,
        )
    })
    .map(|_| ())
}

/// Reap the process behind `pidfd`, returning its wait status and rusage.
pub fn wait_pidfd(pidfd: BorrowedFd<'_>) -> Result<(i32, i32), Errno> {
    // SAFETY: siginfo_t is plain data; zeroed is a valid value.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: info is a valid out-pointer; P_PIDFD with a live pidfd.
        let r = unsafe {
            libc::waitid(
                libc::P_PIDFD,
                pidfd.as_raw_fd() as libc::id_t,
                &mut info,
                libc::WEXITED,
            )
        };
        if r == 0 {
            break;
        }
        let e = Errno::last();
        if e != Errno::EINTR {
            return Err(e);
        }
    }
    // SAFETY: waitid filled a CLD_* siginfo, where si_status is valid.
    let status = unsafe { info.si_status() };
    Ok((info.si_code, status))
}

const OPEN_TREE_CLONE: libc::c_uint = 1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
const MOVE_MOUNT_T_EMPTY_PATH: libc::c_uint = 0x40;

/// A detached copy of the mount at `dir` (an `O_PATH` fd), which a process
/// in another mount namespace can attach with [`move_mount_to`].
pub fn open_tree_clone(dir: BorrowedFd<'_>) -> Result<OwnedFd, Errno> {
    let flags =
        OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | libc::AT_EMPTY_PATH as libc::c_uint;
    // SAFETY: dir is a valid fd and the path is an empty NUL-terminated string.
    let fd =
        check(unsafe { libc::syscall(libc::SYS_open_tree, dir.as_raw_fd(), c"".as_ptr(), flags) })?;
    // SAFETY: the kernel returned a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Set attributes on the detached (or attached) mount behind `tree`.
pub fn mount_setattr_fd(tree: BorrowedFd<'_>, set: u64) -> Result<(), Errno> {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: tree is a valid fd, the path is empty and attr is a valid mount_attr.
    check(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH as libc::c_uint,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    })
    .map(|_| ())
}

/// Attach the detached mount `tree` over the directory `target` (an
/// `O_PATH` fd, so no path is resolved here).
pub fn move_mount_to(tree: BorrowedFd<'_>, target: BorrowedFd<'_>) -> Result<(), Errno> {
    // SAFETY: both fds are valid and both paths are empty NUL-terminated strings.
    check(unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            c"".as_ptr(),
            target.as_raw_fd(),
            c"".as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
        )
    })
    .map(|_| ())
}

/// `pidfd_open(pid, 0)`.
pub fn pidfd_open(pid: libc::pid_t) -> Result<OwnedFd, Errno> {
    // SAFETY: pidfd_open takes plain integers.
    let fd = check(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0u32) })?;
    // SAFETY: the kernel returned a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}
