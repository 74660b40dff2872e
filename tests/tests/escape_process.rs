//! The process rows of the escape catalogue of shared/notes/jail-hardening.md:
//! leaked fds, privilege (no_new_privs, seccomp, capabilities, nosuid), the
//! environment, and the IPC and UTS namespaces. Every row must fail inside
//! the jail. Each test is named for its escape class.

use prims_tests::harness::live_mode;
use prims_tests::*;
use std::io::Write as _;

// --------------------------------------------------------------- fd leaks

#[test]
fn escape_fd_leaks_only_stdio() {
    require_root();
    // An inheritable fd in the test process: a careless CLI or jailer would
    // pass it to python.
    let f = tempfile::NamedTempFile::new().unwrap();
    let path = std::ffi::CString::new(f.path().to_str().unwrap()).unwrap();
    // SAFETY: open(2) without O_CLOEXEC on a path we own; closed below.
    let leak_fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY) };
    assert!(leak_fd >= 0);
    // Beside 0-2, each open fd is named for what it is: a socket, or a copy
    // of one of 0-2 (the same open file). Anything else is a leak.
    let code = r#"
import fcntl, stat, subprocess, sys
kv('listdir', *sorted(os.listdir('/proc/self/fd'), key=int))
_open = []
for _fd in range(0, 4096):
    try:
        os.fstat(_fd)
        _open.append(_fd)
    except OSError:
        pass
kv('fstat_open', *_open)
for _fd in (0, 1, 2):
    kv('link%d' % _fd, os.readlink('/proc/self/fd/%d' % _fd))
_std = {(os.fstat(_fd).st_dev, os.fstat(_fd).st_ino): _fd for _fd in (0, 1, 2)}
_extra, _inheritable = [], []
for _fd in _open[3:]:
    _st = os.fstat(_fd)
    if stat.S_ISSOCK(_st.st_mode):
        _extra.append('socket')
    elif (_st.st_dev, _st.st_ino) in _std:
        _extra.append('copy%d' % _std[(_st.st_dev, _st.st_ino)])
    else:
        _extra.append('other:' + os.readlink('/proc/self/fd/%d' % _fd))
    if not fcntl.fcntl(_fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC:
        _inheritable.append(_fd)
kv('extra', *sorted(_extra))
kv('inheritable', *_inheritable)
_child = subprocess.run(
    [sys.executable, '-c', 'import os; print(*sorted(os.listdir("/proc/self/fd"), key=int))'],
    stdout=subprocess.PIPE, text=True)
kv('child_fds', _child.stdout.strip())
"#;
    let run = Job::probe(code).run();
    // SAFETY: closing the fd opened above.
    unsafe { libc::close(leak_fd) };
    run.assert_ok();
    // A live interpreter's agent holds its channel to the supervisor and
    // copies of 0-2 to put them back after a cell, all close-on-exec; a
    // one-shot python holds nothing beside 0-2.
    let open = run.kv("fstat_open").unwrap_or_default();
    let open: Vec<&str> = open.split_whitespace().collect();
    let (low, high) = open.split_at(open.len().min(3));
    let (extra, listdir) = if live_mode() {
        (
            "copy0 copy1 copy2 socket",
            format!("0 1 2 3 {}", high.join(" ")),
        )
    } else {
        ("", "0 1 2 3".to_string())
    };
    // listdir('/proc/self/fd') itself holds one directory fd, which is 3
    // when only 0, 1 and 2 are open below the agent's high fds.
    run.checks()
        .kv_eq("listdir", listdir.trim_end())
        .check(low == ["0", "1", "2"], format!("0-2 open: {open:?}"))
        .kv_eq("extra", extra)
        .kv_eq("inheritable", "")
        .kv_eq("child_fds", "0 1 2 3")
        .finish();
}

// -------------------------------------------------------------- privilege

#[test]
fn escape_privilege_status_nnp_seccomp_no_caps() {
    let code = r#"
for _line in open('/proc/self/status'):
    _k, _, _v = _line.partition(':')
    if _k in ('NoNewPrivs', 'Seccomp', 'CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb', 'Uid', 'Gid', 'Groups'):
        kv(_k, *_v.split())
"#;
    let run = Job::probe(code).run();
    run.assert_ok();
    let zero = "0000000000000000";
    run.checks()
        .kv_eq("NoNewPrivs", "1")
        .kv_eq("Seccomp", "2")
        .kv_eq("CapInh", zero)
        .kv_eq("CapPrm", zero)
        .kv_eq("CapEff", zero)
        .kv_eq("CapBnd", zero)
        .kv_eq("CapAmb", zero)
        .kv_eq("Uid", "1000 1000 1000 1000")
        .kv_eq("Gid", "1000 1000 1000 1000")
        .kv_eq("Groups", "")
        .finish();
}

/// Not a catalogue row: the init (pid 1) keeps real and saved ids the jail
/// cannot name, while python is 1000 through and through, so the kernel's
/// own uid rules refuse python's signals, pidfd signals and `/proc/1` fds
/// (and seccomp refuses `prlimit` on it before the kernel would).
#[test]
fn escape_privilege_init_out_of_reach() {
    let code = r#"
import signal
def ids(pid):
    for _l in open('/proc/%s/status' % pid):
        if _l.startswith(('Uid:', 'Gid:')):
            kv(_l.split(':')[0] + '_' + str(pid), *_l.split()[1:])
ids(1)
ids('self')
err('kill_init_0', os.kill, 1, 0)
err('kill_init_term', os.kill, 1, signal.SIGTERM)
_pidfd = os.pidfd_open(1)
err('pidfd_signal_init', signal.pidfd_send_signal, _pidfd, 0)
err('init_fd_dir', os.listdir, '/proc/1/fd')
import resource
err('prlimit_init', resource.prlimit, 1, resource.RLIMIT_NOFILE, (1, 1))
# Control: the same calls aimed at python itself work.
err('kill_self_0', os.kill, os.getpid(), 0)
err('pidfd_signal_self', signal.pidfd_send_signal, os.pidfd_open(os.getpid()), 0)
kv('alive', 1)
"#;
    let run = Job::probe(code).run();
    run.assert_ok();
    let mut c = run.checks();
    c.kv_eq("Uid_self", "1000 1000 1000 1000")
        .kv_eq("Gid_self", "1000 1000 1000 1000");
    // Real, effective, saved, filesystem: the init is 1000 only where it
    // must be (effective: the namespace's mapped owner; fs: the files it made).
    for key in ["Uid_1", "Gid_1"] {
        let ids: Vec<String> = run
            .kv(key)
            .unwrap_or_default()
            .split(' ')
            .map(str::to_string)
            .collect();
        c.check(
            ids.len() == 4 && ids[0] != "1000" && ids[2] != "1000" && ids[1] == "1000",
            format!("{key}: real and saved ids are not python's 1000, effective is ({ids:?})"),
        );
    }
    c.os_errno("kill_init_0", libc::EPERM)
        .os_errno("kill_init_term", libc::EPERM)
        .os_errno("pidfd_signal_init", libc::EPERM)
        .os_errno("init_fd_dir", libc::EACCES)
        .os_errno("prlimit_init", libc::EPERM)
        .os_ok("kill_self_0")
        .os_ok("pidfd_signal_self")
        .kv_eq("alive", "1");
    c.finish();
}

#[test]
fn escape_privilege_every_mount_nosuid() {
    require_root();
    // Pair: the host has mounts without nosuid.
    let host = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        host.lines().any(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            !f[5].split(',').any(|o| o == "nosuid")
        }),
        "pairing: every host mount is nosuid already"
    );
    let run = Job::probe(
        "for _l in open('/proc/self/mountinfo'):\n    print('MNT', _l.rstrip('\\n'), flush=True)\n",
    )
    .run();
    run.assert_ok();
    let mut c = run.checks();
    let mut opts_of = std::collections::BTreeMap::new();
    let mut n = 0;
    for l in run.lines() {
        let Some(rest) = l.strip_prefix("MNT ") else {
            continue;
        };
        n += 1;
        let f: Vec<&str> = rest.split(' ').collect();
        let (mp, opts) = (f[4].to_string(), f[5].to_string());
        c.check(
            opts.split(',').any(|o| o == "nosuid"),
            format!("mount {mp} has nosuid (options {opts})"),
        );
        opts_of.insert(mp, opts);
    }
    c.check(n >= 5, format!("{n} mounts listed"));
    // The contract's specific flags.
    for (mp, want) in [
        ("/workspace", &["rw", "nosuid", "nodev"][..]),
        ("/workspace/mounts", &["ro", "nosuid", "nodev"][..]),
        ("/tmp", &["nosuid", "nodev"][..]),
        ("/proc", &["nosuid", "nodev", "noexec"][..]),
        ("/usr", &["ro", "nosuid"][..]),
        ("/proc/sys", &["ro", "nosuid"][..]),
    ] {
        match opts_of.get(mp) {
            None => {
                c.check(false, format!("mount {mp} exists"));
            }
            Some(o) => {
                for w in want {
                    c.check(
                        o.split(',').any(|x| x == *w),
                        format!("mount {mp} has {w} (options {o})"),
                    );
                }
            }
        }
    }
    c.finish();
}

// ------------------------------------------------------------ environment

#[test]
fn escape_environment_only_allowlisted_keys() {
    let canary = unique("canary");
    let code = format!(
        "import resource\n\
         kv('env', *sorted(os.environ))\n\
         kv('canary_seen', any({c} in v for v in os.environ.values()))\n\
         kv('core', *resource.getrlimit(resource.RLIMIT_CORE))\n",
        c = py_str(&canary)
    );
    let run = Job::probe(&code)
        .env("PRIMS_TEST_CANARY", &canary)
        .env("LD_PRELOAD", "/nonexistent/prims-canary.so")
        .env("PYTHONPATH", "/nonexistent")
        .core_unlimited()
        .run();
    run.assert_ok();
    // A live interpreter's notebook adds where IPython and matplotlib keep
    // their files, and matplotlib's inline backend, for `!cmd` too. Every
    // job says how many cores loky may use (the job's CPU limit).
    let env = if live_mode() {
        "HOME IPYTHONDIR LANG LOKY_MAX_CPU_COUNT MPLBACKEND MPLCONFIGDIR PATH PYTHONUNBUFFERED TMPDIR VIRTUAL_ENV"
    } else {
        "HOME LANG LOKY_MAX_CPU_COUNT PATH PYTHONUNBUFFERED TMPDIR VIRTUAL_ENV"
    };
    run.checks()
        .kv_eq("env", env)
        .kv_eq("canary_seen", "False")
        .kv_eq("core", "0 0")
        .finish();
}

// ------------------------------------------------------------ IPC and UTS

#[test]
fn escape_ipc_sysv_shm_and_msg_invisible() {
    require_root();
    let key: i32 = 0x5052_0000 | ((std::process::id() as i32 & 0xfff) << 4) | 0x3;
    // SAFETY: plain SysV IPC calls; both objects are removed below.
    let (shm_id, msg_id) = unsafe {
        let shm = libc::shmget(key, 4096, libc::IPC_CREAT | libc::IPC_EXCL | 0o666);
        assert!(shm >= 0, "host shmget: {}", std::io::Error::last_os_error());
        let msg = libc::msgget(key, libc::IPC_CREAT | libc::IPC_EXCL | 0o666);
        assert!(msg >= 0, "host msgget: {}", std::io::Error::last_os_error());
        // Pair: visible on the host.
        assert_eq!(libc::shmget(key, 0, 0), shm);
        (shm, msg)
    };
    let run = Job::probe(&format!(
        "sc('shmget', 29, {key}, 0, 0)\nsc('msgget', 68, {key}, 0)\nsc('shmat_host_id', 30, {shm_id}, 0, 0)\n"
    ))
    .run();
    // SAFETY: removing the objects created above.
    unsafe {
        libc::shmctl(shm_id, libc::IPC_RMID, std::ptr::null_mut());
        libc::msgctl(msg_id, libc::IPC_RMID, std::ptr::null_mut());
    }
    run.assert_ok();
    let mut c = run.checks();
    c.sc_errno("shmget", libc::ENOENT)
        .sc_errno("msgget", libc::ENOENT);
    // Attaching by the host's id: the jail's IPC namespace has no such id.
    let shmat = run.syscalls().get("shmat_host_id").copied();
    c.check(
        matches!(shmat, Some((-1, e)) if e == libc::EINVAL || e == libc::EIDRM),
        format!("shmat of the host shm id fails with EINVAL ({shmat:?})"),
    );
    c.finish();
}

#[test]
fn escape_uts_hostname_sandbox() {
    require_root();
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes.
    unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let host =
        String::from_utf8_lossy(&buf[..buf.iter().position(|&b| b == 0).unwrap_or(0)]).into_owned();
    assert_ne!(
        host, "sandbox",
        "pairing: the host is already named sandbox"
    );
    let run = Job::probe(
        "import socket\nkv('hostname', socket.gethostname())\nkv('nodename', os.uname().nodename)\n",
    )
    .run();
    run.assert_ok();
    run.checks()
        .kv_eq("hostname", "sandbox")
        .kv_eq("nodename", "sandbox")
        .finish();
    let _ = std::io::stderr().flush();
}
