//! Host-wide kernel limits a jail must not spend for everyone else. The
//! jail's user namespace is owned by the job's host uid, so the kernel
//! charges per-user counts (inotify instances, ...) to that uid at the host
//! level and never to host root, and the namespace's own ceilings are
//! modest. Asynchronous I/O, whose contexts count against one host-wide
//! limit, is refused outright.
//!
//! Each test holds a jail open (`Held`) while the host, as root, checks that
//! its own calls still work and where the jail's use was charged.

use prims_tests::*;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

/// The jailer's ceilings for the jail's own user namespace
/// (`jailer/src/userns_limits.rs`).
const JAIL_INOTIFY_INSTANCES: u64 = 64;
const JAIL_INOTIFY_WATCHES: u64 = 8192;

/// `NS_GET_OWNER_UID`, `_IO(0xb7, 0x4)` in linux/nsfs.h.
const NS_GET_OWNER_UID: libc::c_ulong = 0xb704;

/// A host uid for this test process's jobs alone (`prims run` maps jail uid
/// 1000 to `identity.uid_base`), outside the ranges the other tests and the
/// default policy use, so no other process shares its kernel counts.
fn private_host_uid() -> u32 {
    300_000 + std::process::id() % 90_000
}

fn policy(host_uid: u32) -> String {
    policy_with(
        "45s",
        &format!("[identity]\nuid_base = {host_uid}\nuid_count = 1\n"),
    )
}

fn read_u64(path: &str) -> u64 {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("reading {path}: {e}"))
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{path} is not a number: {e}"))
}

/// `inotify_init1` as the test process (host root): Ok, or the errno.
fn root_inotify_init() -> Result<(), i32> {
    // SAFETY: inotify_init1 has no memory-safety preconditions.
    let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(-1));
    }
    // SAFETY: closing the fd made just above.
    unsafe { libc::close(fd) };
    Ok(())
}

/// `io_setup(1)` as the test process (host root): Ok, or the errno.
fn root_io_setup() -> Result<(), i32> {
    let mut ctx: libc::c_ulong = 0;
    // SAFETY: io_setup writes the new context id into ctx, which outlives the call.
    let r = unsafe { libc::syscall(libc::SYS_io_setup, 1 as libc::c_long, &mut ctx) };
    if r != 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(-1));
    }
    // SAFETY: destroying the context made just above.
    unsafe { libc::syscall(libc::SYS_io_destroy, ctx) };
    Ok(())
}

/// Creates inotify instances as a host process of `uid` until the kernel
/// refuses; returns (how many, the errno, its hard RLIMIT_NOFILE).
fn inotify_instances_left_for(uid: u32) -> (u64, i32, u64) {
    const COUNT: &str = "import ctypes, resource\n\
        libc = ctypes.CDLL(None, use_errno=True)\n\
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n\
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))\n\
        n = 0\n\
        while True:\n    \
            if libc.inotify_init1(0o2000000) < 0:\n        \
                print(n, ctypes.get_errno(), hard)\n        \
                break\n    \
            n += 1\n";
    let mut cmd = Command::new("/usr/bin/python3");
    cmd.args(["-I", "-c", COUNT])
        .current_dir("/")
        .uid(uid)
        .gid(uid);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    let f: Vec<u64> = out
        .stdout_str()
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    assert!(
        out.code == Some(0) && f.len() == 3,
        "counting inotify instances as uid {uid}:\n{}",
        out.describe()
    );
    (f[0], f[1] as i32, f[2])
}

/// The owner of the user namespace of host pid `pid`, as the host sees it.
fn userns_owner(pid: i32) -> u32 {
    let ns = std::fs::File::open(format!("/proc/{pid}/ns/user"))
        .unwrap_or_else(|e| panic!("opening /proc/{pid}/ns/user: {e}"));
    let mut uid: libc::uid_t = u32::MAX;
    // SAFETY: NS_GET_OWNER_UID writes one uid_t through the pointer.
    let r = unsafe {
        libc::ioctl(
            std::os::fd::AsRawFd::as_raw_fd(&ns),
            NS_GET_OWNER_UID,
            &mut uid,
        )
    };
    assert_eq!(
        r,
        0,
        "NS_GET_OWNER_UID on /proc/{pid}/ns/user: {}",
        std::io::Error::last_os_error()
    );
    uid
}

fn status_field(pid: i32, key: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}:")))
        .unwrap_or_else(|| panic!("/proc/{pid}/status has no {key}"))
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn escape_inotify_charged_to_host_uid_not_root() {
    require_root();
    if prims_tests::harness::forked_mode() {
        // A forked child's user namespace is made inside its template's, so
        // it is owned by the template's uid (docs/security.md): what each
        // budget the kernel counts up that chain leaves every forked
        // session is kernel_budgets.rs's to check, in both modes.
        println!("skipped in forked mode: the user namespace is owned by the template's uid; tests/tests/kernel_budgets.rs checks each session keeps its own share");
        return;
    }
    let host_uid = private_host_uid();
    let host_limit = read_u64("/proc/sys/fs/inotify/max_user_instances");
    assert_eq!(
        root_inotify_init(),
        Ok(()),
        "pairing: host root can make an inotify instance before the jail runs"
    );
    let code = format!(
        "{HOLD_PY}\n\
         kv('max_instances', open('/proc/sys/user/max_inotify_instances').read().strip())\n\
         kv('max_watches', open('/proc/sys/user/max_inotify_watches').read().strip())\n\
         _held = []\n\
         while True:\n    \
             _fd = libc.inotify_init1(0o2000000)\n    \
             if _fd < 0:\n        \
                 kv('stop_errno', ctypes.get_errno())\n        \
                 break\n    \
             _held.append(_fd)\n\
         kv('held', len(_held))\n\
         hold()\n"
    );
    let held = Held::start(Job::probe(&code).policy(policy(host_uid)));
    // While the jail holds every instance it could get.
    let root_now = root_inotify_init();
    let (left, left_errno, nofile) = inotify_instances_left_for(host_uid);
    let run = held.release();
    run.assert_ok();

    let jail_share = JAIL_INOTIFY_INSTANCES.min(host_limit);
    assert!(
        host_limit + 16 < nofile,
        "pairing: RLIMIT_NOFILE {nofile} would stop the count before the inotify limit {host_limit}"
    );
    run.checks()
        .kv_eq("max_instances", &JAIL_INOTIFY_INSTANCES.to_string())
        .kv_eq("max_watches", &JAIL_INOTIFY_WATCHES.to_string())
        .kv_eq("stop_errno", &libc::EMFILE.to_string())
        .kv_eq("held", &jail_share.to_string())
        .kv_eq("released", "True")
        .check(
            root_now.is_ok(),
            format!(
                "host root's inotify_init1 works while the jail holds its instances ({root_now:?})"
            ),
        )
        .check(
            left == host_limit - jail_share && left_errno == libc::EMFILE,
            format!(
                "the jail's {jail_share} instances count against host uid {host_uid}: \
                 it has {left} of {host_limit} left (errno {left_errno})"
            ),
        )
        .finish();
}

#[test]
fn escape_aio_refused_and_host_io_setup_still_works() {
    require_root();
    assert_eq!(
        root_io_setup(),
        Ok(()),
        "pairing: host root's io_setup works before the jail runs"
    );
    // Without the filter this fills fs.aio-max-nr: 1024 events per context
    // until the kernel says EAGAIN.
    let code = format!(
        "{HOLD_PY}\n\
         _ctx = ctypes.c_ulong(0)\n\
         sc('io_setup_65536', 206, 65536, ctypes.addressof(_ctx))\n\
         _ctxs = []\n\
         while len(_ctxs) < 100000:\n    \
             _c = ctypes.c_ulong(0)\n    \
             if libc.syscall(ctypes.c_long(206), ctypes.c_long(1024), ctypes.c_long(ctypes.addressof(_c))) != 0:\n        \
                 kv('stop_errno', ctypes.get_errno())\n        \
                 break\n    \
             _ctxs.append(_c)\n\
         kv('contexts', len(_ctxs))\n\
         hold()\n"
    );
    let held = Held::start(Job::probe(&code));
    let root_now = root_io_setup();
    let run = held.release();
    run.assert_ok();
    run.checks()
        .sc_errno("io_setup_65536", libc::EPERM)
        .kv_eq("stop_errno", &libc::EPERM.to_string())
        .kv_eq("contexts", "0")
        .check(
            root_now.is_ok(),
            format!("host root's io_setup works while the jail runs ({root_now:?})"),
        )
        .finish();
}

#[test]
fn escape_userns_owned_by_host_uid() {
    require_root();
    if prims_tests::harness::forked_mode() {
        // A forked child's user namespace is made inside its template's, so
        // it is owned by the template's uid (docs/security.md): what each
        // budget the kernel counts up that chain leaves every forked
        // session is kernel_budgets.rs's to check, in both modes.
        println!("skipped in forked mode: the user namespace is owned by the template's uid; tests/tests/kernel_budgets.rs checks each session keeps its own share");
        return;
    }
    let host_uid = private_host_uid();
    let held = Held::start(Job::probe(&format!("{HOLD_PY}\nhold()\n")).policy(policy(host_uid)));
    let python = held.python_pid();
    let init: i32 = status_field(python, "PPid").parse().unwrap();
    let python_owner = userns_owner(python);
    let init_owner = userns_owner(init);
    let same_ns = std::fs::read_link(format!("/proc/{python}/ns/user")).unwrap()
        == std::fs::read_link(format!("/proc/{init}/ns/user")).unwrap();
    let own_ns = std::fs::read_link("/proc/self/ns/user").unwrap()
        != std::fs::read_link(format!("/proc/{python}/ns/user")).unwrap();
    let python_uid = status_field(python, "Uid");
    let init_uid = status_field(init, "Uid");
    let run = held.release();
    run.assert_ok();
    let h = host_uid.to_string();
    run.checks()
        .kv_eq("released", "True")
        .check(own_ns, "python runs in a user namespace of its own")
        .check(same_ns, "the init and python share that namespace")
        .check(
            python_owner == host_uid && init_owner == host_uid,
            format!("the namespace's owner is host uid {host_uid} (python's: {python_owner}, the init's: {init_owner})"),
        )
        .check(
            python_uid == format!("{h} {h} {h} {h}"),
            format!("python is host uid {h} through and through (Uid: {python_uid})"),
        )
        .check(
            init_uid == format!("0 {h} 0 {h}"),
            format!("the init's real and saved uids are ones the jail cannot name (Uid: {init_uid})"),
        )
        .finish();
}
