//! The jail's filesystem: a fresh tmpfs root holding read-only binds, the
//! workspace, `/tmp`, a new `/proc`, a minimal `/dev` with a `/dev/shm` of
//! the jail's own, then `pivot_root`.
//!
//! Sources are opened with `O_PATH|O_NOFOLLOW` while the init still has its
//! host filesystem identity, then bound from `/proc/self/fd/N`, so no path
//! that jailed code could have planted is ever followed.

use crate::error::JailError;
use crate::mounts::{bind, mkdir_p, set_attr, symlink, tmpfs, touch, write_file, RO};
use crate::plan::variant::{ProcView, Variant};
use crate::sys::{MOUNT_ATTR_NODEV, MOUNT_ATTR_NOEXEC, MOUNT_ATTR_NOSUID, MOUNT_ATTR_RDONLY};
use crate::{proc_mask, userns_limits};
use nix::errno::Errno;
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use prims_protocol::jail::JobSpec;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Where the new root is assembled before `pivot_root`. The mount namespace
/// is private, so covering the host's `/tmp` here changes nothing outside.
const NEW_ROOT: &str = "/tmp";
const DEV_NODES: [&str; 5] = ["null", "zero", "full", "random", "urandom"];
const PROC_READ_ONLY: [&str; 4] = ["sys", "sysrq-trigger", "irq", "bus"];
pub const JAIL_UID: u32 = 1000;

enum Source {
    Dir(PathBuf, OwnedFd),
    File(PathBuf, OwnedFd),
    Link(PathBuf, PathBuf),
}

pub struct Sources {
    binds: Vec<Source>,
    /// Extra binds from the spec: (target, fd, writable).
    extra: Vec<(PathBuf, OwnedFd, bool)>,
    venv: OwnedFd,
    workspace: OwnedFd,
    mounts_dir: Option<OwnedFd>,
    devs: Vec<(&'static str, OwnedFd)>,
}

fn open_path(path: &Path, extra: i32) -> Result<OwnedFd, Errno> {
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| Errno::EINVAL)?;
    // SAFETY: c is NUL-terminated; the returned fd is owned by the caller.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC | extra,
        )
    };
    if fd < 0 {
        return Err(Errno::last());
    }
    // SAFETY: fd was just returned by open and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn file_type(fd: &OwnedFd) -> Result<libc::mode_t, Errno> {
    // SAFETY: stat is plain data; fstat fills it for a valid fd.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fd is valid for the call and st is a valid out-pointer.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } < 0 {
        return Err(Errno::last());
    }
    Ok(st.st_mode & libc::S_IFMT)
}

pub(crate) fn open_dir(path: &Path) -> Result<OwnedFd, JailError> {
    open_path(path, libc::O_DIRECTORY).map_err(|errno| match errno {
        Errno::ENOTDIR | Errno::ELOOP => JailError::NotADirectory {
            path: path.to_path_buf(),
        },
        errno => JailError::OpenSource {
            path: path.to_path_buf(),
            errno,
        },
    })
}

/// Open every source while the process can still see the host.
pub fn open_sources(spec: &JobSpec) -> Result<Sources, JailError> {
    let mut paths: Vec<&PathBuf> = spec.ro_binds.iter().collect();
    paths.sort();
    paths.dedup();
    let mut binds = Vec::new();
    let mut taken: Vec<&PathBuf> = Vec::new();
    for p in paths {
        // A bind below an earlier one is already visible through it.
        if taken.iter().any(|t| p.starts_with(t)) {
            continue;
        }
        let fd = match open_path(p, 0) {
            Ok(fd) => fd,
            Err(Errno::ENOENT) => continue,
            Err(errno) => {
                return Err(JailError::OpenSource {
                    path: p.clone(),
                    errno,
                })
            }
        };
        let kind = file_type(&fd).map_err(|errno| JailError::OpenSource {
            path: p.clone(),
            errno,
        })?;
        let src = match kind {
            libc::S_IFDIR => Source::Dir(p.clone(), fd),
            libc::S_IFLNK => {
                let target = std::fs::read_link(p).map_err(|e| JailError::OpenSource {
                    path: p.clone(),
                    errno: Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
                })?;
                Source::Link(p.clone(), target)
            }
            _ => Source::File(p.clone(), fd),
        };
        taken.push(p);
        binds.push(src);
    }
    let mut extra = Vec::new();
    for b in &spec.binds {
        extra.push((b.target.clone(), open_dir(&b.source)?, b.writable));
    }
    let venv = open_dir(&spec.venv)?;
    let workspace = open_dir(&spec.workspace)?;
    let mounts_dir = open_mounts_dir(&spec.workspace.join("mounts"))?;
    let mut devs = Vec::new();
    for name in DEV_NODES {
        let p = Path::new("/dev").join(name);
        let fd = open_path(&p, 0).map_err(|errno| JailError::OpenSource { path: p, errno })?;
        devs.push((name, fd));
    }
    Ok(Sources {
        binds,
        extra,
        venv,
        workspace,
        mounts_dir,
        devs,
    })
}

/// The workspace's `mounts/`, if it is there: a directory, never a link.
pub(crate) fn open_mounts_dir(mounts_path: &Path) -> Result<Option<OwnedFd>, JailError> {
    match open_path(mounts_path, 0) {
        Err(Errno::ENOENT) => Ok(None),
        Err(errno) => Err(JailError::OpenSource {
            path: mounts_path.to_path_buf(),
            errno,
        }),
        Ok(fd) if file_type(&fd) == Ok(libc::S_IFDIR) => Ok(Some(fd)),
        Ok(_) => Err(JailError::NotADirectory {
            path: mounts_path.to_path_buf(),
        }),
    }
}

fn fd_path(fd: &OwnedFd) -> String {
    format!("/proc/self/fd/{}", fd.as_raw_fd())
}

fn in_root(p: &Path) -> PathBuf {
    Path::new(NEW_ROOT).join(p.strip_prefix("/").unwrap_or(p))
}

/// Assemble the new root and pivot into it. Runs as the jail's fs identity.
pub fn build(spec: &JobSpec, variant: &Variant, src: Sources) -> Result<(), JailError> {
    let root = Path::new(NEW_ROOT);
    let nosuid_nodev = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    tmpfs(root, nosuid_nodev, "mode=0755,size=1m,nr_inodes=4096")?;

    let mut etc_is_bound = false;
    for bind_src in &src.binds {
        match bind_src {
            Source::Dir(p, fd) => {
                let t = in_root(p);
                mkdir_p(&t)?;
                bind(&fd_path(fd), &t, true)?;
                set_attr(&t, RO, true)?;
                etc_is_bound |= p == Path::new("/etc");
            }
            Source::File(p, fd) => {
                let t = in_root(p);
                touch(&t)?;
                bind(&fd_path(fd), &t, false)?;
                set_attr(&t, RO, false)?;
            }
            Source::Link(p, target) => {
                let t = in_root(p);
                if let Some(parent) = t.parent() {
                    mkdir_p(parent)?;
                }
                symlink(target, &t)?;
            }
        }
    }

    let venv = in_root(Path::new("/venv"));
    mkdir_p(&venv)?;
    bind(&fd_path(&src.venv), &venv, true)?;
    if spec.venv_writable {
        set_attr(&venv, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, true)?;
    } else {
        set_attr(&venv, RO, true)?;
    }
    for (target, fd, writable) in &src.extra {
        let t = in_root(target);
        mkdir_p(&t)?;
        bind(&fd_path(fd), &t, true)?;
        let attrs = if *writable {
            MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV
        } else {
            RO
        };
        set_attr(&t, attrs, true)?;
    }

    let ws = in_root(Path::new("/workspace"));
    mkdir_p(&ws)?;
    bind(&fd_path(&src.workspace), &ws, false)?;
    set_attr(&ws, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, false)?;
    if let Some(mounts) = &src.mounts_dir {
        // Resolve the target inside the bound workspace without following links.
        let target = open_dir(&ws.join("mounts"))?;
        let t = PathBuf::from(fd_path(&target));
        bind(&fd_path(mounts), &t, false)?;
        set_attr(&ws.join("mounts"), RO | MOUNT_ATTR_NOEXEC, false)?;
    }

    let tmp = in_root(Path::new("/tmp"));
    mkdir_p(&tmp)?;
    mount_tmp(&tmp, spec)?;

    build_dev(root, &src.devs, variant.shm.then_some(spec))?;
    match variant.proc {
        ProcView::Masked => build_proc(root)?,
        ProcView::ForChildren { keeper } => build_template_proc(root, keeper)?,
    }
    if !etc_is_bound {
        build_etc(root)?;
    }
    pivot(root)
}

/// The job's size-limited `/tmp` at `target`.
pub(crate) fn mount_tmp(target: &Path, spec: &JobSpec) -> Result<(), JailError> {
    let opts = format!(
        "mode=1777,size={},nr_inodes={}",
        spec.limits.tmp_size_bytes,
        tmp_inodes(spec.limits.tmp_size_bytes)
    );
    tmpfs(target, MsFlags::MS_NOSUID | MsFlags::MS_NODEV, &opts)
}

/// The job's `/dev/shm` at `target`: POSIX shared memory and semaphores
/// (`multiprocessing`'s locks, queues and `shared_memory`). A tmpfs of its
/// own, so nothing in it is shared with another jail, or with a template's
/// children (each child's init mounts one over the template's); its pages
/// are charged to the memory cgroup of the process that writes them, the
/// job's, so it is as big as the job's memory limit and can hold no more.
pub(crate) fn mount_shm(target: &Path, spec: &JobSpec) -> Result<(), JailError> {
    let size = shm_size(spec);
    let opts = format!("mode=1777,size={size},nr_inodes={}", tmp_inodes(size));
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    tmpfs(target, flags, &opts)
}

/// The job's memory limit, or `/tmp`'s size for a job without one.
fn shm_size(spec: &JobSpec) -> u64 {
    match spec.limits.memory_bytes {
        0 => spec.limits.tmp_size_bytes,
        limit => limit,
    }
}

/// One inode per 4 KiB of space, so a million empty files hit ENOSPC early.
fn tmp_inodes(size: u64) -> u64 {
    (size / 4096).clamp(1024, 1 << 20)
}

/// `/dev`: the device nodes, their links, and `/dev/shm`, a mount point
/// that gets `shm`'s tmpfs when there is one.
fn build_dev(
    root: &Path,
    devs: &[(&'static str, OwnedFd)],
    shm: Option<&JobSpec>,
) -> Result<(), JailError> {
    let dev = root.join("dev");
    mkdir_p(&dev)?;
    tmpfs(
        &dev,
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        "mode=0755,size=64k,nr_inodes=64",
    )?;
    let dir = dev.join("shm");
    mkdir_p(&dir)?;
    if let Some(spec) = shm {
        mount_shm(&dir, spec)?;
    }
    for (name, fd) in devs {
        let t = dev.join(name);
        touch(&t)?;
        bind(&fd_path(fd), &t, false)?;
        set_attr(&t, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, false)?;
    }
    for (link, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        symlink(Path::new(target), &dev.join(link))?;
    }
    set_attr(
        &dev,
        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC,
        false,
    )
}

fn build_proc(root: &Path) -> Result<(), JailError> {
    let proc_dir = root.join("proc");
    mkdir_p(&proc_dir)?;
    mount_proc(&proc_dir, root)
}

/// A fresh procfs at `proc_dir`, with the jail's limits set through it and
/// its host-revealing parts masked; `scratch` is a writable directory.
pub(crate) fn mount_proc(proc_dir: &Path, scratch: &Path) -> Result<(), JailError> {
    mount(
        Some("proc"),
        proc_dir,
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(JailError::MountProc)?;
    // Through the jail's own proc, before /proc/sys turns read-only below.
    userns_limits::apply(proc_dir)?;
    for name in PROC_READ_ONLY {
        let p = proc_dir.join(name);
        if p.symlink_metadata().is_err() {
            continue;
        }
        bind(&p.display().to_string(), &p, true)?;
        set_attr(&p, RO | MOUNT_ATTR_NOEXEC, true)?;
    }
    proc_mask::apply(scratch, proc_dir)
}

/// Where a template's procfs goes: the host's (a template has no pid
/// namespace of its own), bound whole, since a child's init may mount a
/// procfs of its own only where one is fully visible already. It sits in
/// [`TEMPLATE_PROC_DIR`], mode 0 and owned by the last id of the
/// children's range, which the supervisor gives no session (it runs
/// environment builds, which never see this root): neither the template
/// nor any child can look inside.
pub const TEMPLATE_PROC: &str = "/.t/proc";
pub const TEMPLATE_PROC_DIR: &str = "/.t";

fn build_template_proc(root: &Path, keeper: u32) -> Result<(), JailError> {
    mkdir_p(&root.join("proc"))?;
    let proc_dir = in_root(Path::new(TEMPLATE_PROC));
    mkdir_p(&proc_dir)?;
    // No ceilings of its own here: the kernel counts each child's inotify
    // use in the template's namespace too, and its children would share
    // them; each child's init sets a cold jail's in the child's own.
    bind("/proc", &proc_dir, true)?;
    // Not read-only: a child's new procfs could then only be read-only too.
    set_attr(
        &proc_dir,
        MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
        true,
    )?;
    let dir = in_root(Path::new(TEMPLATE_PROC_DIR));
    let id = |errno| JailError::WriteFile {
        path: TEMPLATE_PROC_DIR.into(),
        errno,
    };
    nix::unistd::chown(
        &dir,
        Some(nix::unistd::Uid::from_raw(keeper)),
        Some(nix::unistd::Gid::from_raw(keeper)),
    )
    .map_err(id)?;
    nix::sys::stat::fchmodat(
        nix::fcntl::AT_FDCWD,
        &dir,
        nix::sys::stat::Mode::empty(),
        nix::sys::stat::FchmodatFlags::FollowSymlink,
    )
    .map_err(id)
}

fn build_etc(root: &Path) -> Result<(), JailError> {
    let etc = root.join("etc");
    mkdir_p(&etc)?;
    let files: [(&str, &[u8]); 3] = [
        (
            "passwd",
            b"sandbox:x:1000:1000:sandbox:/tmp:/usr/sbin/nologin\n",
        ),
        ("group", b"sandbox:x:1000:\n"),
        ("hosts", b"127.0.0.1 localhost sandbox\n::1 localhost\n"),
    ];
    for (name, text) in files {
        // A file bound from the host (an environment build's /etc/hosts) wins.
        let p = etc.join(name);
        if p.symlink_metadata().is_err() {
            write_file(&p, text)?;
        }
    }
    Ok(())
}

fn pivot(root: &Path) -> Result<(), JailError> {
    let chdir = |p: &Path| {
        nix::unistd::chdir(p).map_err(|errno| JailError::Chdir {
            path: p.display().to_string(),
            errno,
        })
    };
    chdir(root)?;
    nix::unistd::pivot_root(".", ".").map_err(JailError::PivotRoot)?;
    umount2(".", MntFlags::MNT_DETACH).map_err(JailError::DetachOldRoot)?;
    chdir(Path::new("/"))?;
    set_attr(Path::new("/"), RO, false)
}
