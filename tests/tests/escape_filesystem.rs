//! The filesystem rows of the escape catalogue of shared/notes/jail-hardening.md
//! that are about what the jail can see: `/dev`, `/proc` and host files.
//! Every row must fail inside the jail. Each test is named for its escape
//! class.

use prims_tests::*;
use std::path::Path;

const EPERM: i32 = libc::EPERM;

// ------------------------------------------------------------------- /dev

#[test]
fn escape_dev_exact_allowlist() {
    let code = r#"
import stat
kv('dev', *sorted(os.listdir('/dev')))
for _n in ('fd', 'stdin', 'stdout', 'stderr'):
    _p = '/dev/' + _n
    kv('link_' + _n, os.readlink(_p) if os.path.islink(_p) else 'notalink')
for _n in ('null', 'zero', 'full', 'random', 'urandom'):
    _st = os.stat('/dev/' + _n)
    kv('chr_' + _n, stat.S_ISCHR(_st.st_mode), os.major(_st.st_rdev), os.minor(_st.st_rdev))
err('write_null', lambda: open('/dev/null', 'wb').write(b'x'))
kv('zero_read', open('/dev/zero', 'rb').read(4).hex())
kv('urandom_len', len(open('/dev/urandom', 'rb').read(16)))
"#;
    let run = Job::probe(code).run();
    run.assert_ok();
    run.checks()
        .kv_eq(
            "dev",
            "fd full null random shm stderr stdin stdout urandom zero",
        )
        .kv_eq("link_fd", "/proc/self/fd")
        .kv_eq("link_stdin", "/proc/self/fd/0")
        .kv_eq("link_stdout", "/proc/self/fd/1")
        .kv_eq("link_stderr", "/proc/self/fd/2")
        .kv_eq("chr_null", "True 1 3")
        .kv_eq("chr_zero", "True 1 5")
        .kv_eq("chr_full", "True 1 7")
        .kv_eq("chr_random", "True 1 8")
        .kv_eq("chr_urandom", "True 1 9")
        .os_ok("write_null")
        .kv_eq("zero_read", "00000000")
        .kv_eq("urandom_len", "16")
        .finish();
}

/// `/dev/shm` is a tmpfs of the jail's own: nosuid, nodev, noexec, mode
/// 1777, as big as the run's memory limit (its pages are charged to the
/// jail's memory cgroup: `limits::memory_shm_*`). Code writes there, and
/// runs nothing from there.
#[test]
fn escape_dev_shm_private_tmpfs_noexec() {
    let code = r#"
import stat, shutil, subprocess
for _l in open('/proc/self/mountinfo'):
    _f = _l.split()
    if _f[4] == '/dev/shm':
        _sep = _f.index('-')
        kv('shm_fs', _f[_sep + 1])
        kv('shm_opts', *sorted(o for o in _f[5].split(',') if o in ('nosuid', 'nodev', 'noexec', 'ro', 'rw')))
        kv('shm_super', *sorted(o for o in _f[_sep + 3].split(',') if o.startswith(('mode=', 'size='))))
kv('shm_mode', oct(stat.S_IMODE(os.stat('/dev/shm').st_mode)), stat.S_ISVTX & os.stat('/dev/shm').st_mode != 0)
_v = os.statvfs('/dev/shm')
kv('shm_bytes', _v.f_blocks * _v.f_frsize)
err('write', lambda: open('/dev/shm/x', 'wb').write(b'x' * 4096))
shutil.copy('/bin/true', '/dev/shm/true')
os.chmod('/dev/shm/true', 0o755)
err('exec', subprocess.run, ['/dev/shm/true'])
err('mknod', os.mknod, '/dev/shm/n', stat.S_IFCHR | 0o600, os.makedev(1, 3))
kv('left', *sorted(os.listdir('/dev/shm')))
"#;
    let run = Job::probe(code)
        .policy(policy_with("10s", "memory = \"256MiB\"\n"))
        .run();
    run.assert_ok();
    run.checks()
        .kv_eq("shm_fs", "tmpfs")
        .kv_eq("shm_opts", "nodev noexec nosuid rw")
        // tmpfs names its mode only when it is not 1777, the default.
        .kv_eq("shm_super", "size=262144k")
        .kv_eq("shm_mode", "0o1777 True")
        .kv_eq("shm_bytes", &(256u64 << 20).to_string())
        .os_ok("write")
        .os_errno("exec", libc::EACCES)
        .os_errno("mknod", libc::EPERM)
        .kv_eq("left", "true x")
        .finish();
}

#[test]
fn escape_dev_mknod_eperm() {
    let code = r#"
import stat
err('mknod_chr_tmp', os.mknod, '/tmp/n1', stat.S_IFCHR | 0o600, os.makedev(1, 3))
err('mknod_blk_tmp', os.mknod, '/tmp/n2', stat.S_IFBLK | 0o600, os.makedev(7, 0))
err('mknod_chr_workspace', os.mknod, '/workspace/n3', stat.S_IFCHR | 0o600, os.makedev(1, 1))
"#;
    let run = Job::probe(code).run();
    run.assert_ok();
    run.checks()
        .os_errno("mknod_chr_tmp", EPERM)
        .os_errno("mknod_blk_tmp", EPERM)
        .os_errno("mknod_chr_workspace", EPERM)
        .finish();
}

#[test]
fn escape_dev_kmsg_enoent() {
    require_root();
    assert!(
        Path::new("/dev/kmsg").exists() && Path::new("/dev/console").exists(),
        "pairing: the host has /dev/kmsg and /dev/console"
    );
    let run = Job::probe(
        "err('open_kmsg', open, '/dev/kmsg', 'rb')\n\
         err('open_console', open, '/dev/console', 'rb')\n\
         err('open_mem', open, '/dev/mem', 'rb')\n",
    )
    .run();
    run.assert_ok();
    run.checks()
        .os_errno("open_kmsg", libc::ENOENT)
        .os_errno("open_console", libc::ENOENT)
        .os_errno("open_mem", libc::ENOENT)
        .finish();
}

// ------------------------------------------------------------------ /proc

#[test]
fn escape_proc_sensitive_files_not_writable() {
    require_root();
    // On a kernel without CONFIG_MAGIC_SYSRQ /proc/sysrq-trigger does not
    // exist at all (this CI host), so opening it for writing is ENOENT; where
    // it exists the read-only bind must answer EROFS.
    let sysrq_expected = if Path::new("/proc/sysrq-trigger").exists() {
        libc::EROFS
    } else {
        libc::ENOENT
    };
    // python's 'w' is O_WRONLY|O_CREAT|O_TRUNC: on an existing file O_TRUNC
    // makes the kernel check the mount for writing first, so a read-only
    // bind gives EROFS; without the bind the jail user would get EACCES.
    let run = Job::probe(
        "err('sysrq_trigger_w', open, '/proc/sysrq-trigger', 'w')\n\
         err('core_pattern_w', open, '/proc/sys/kernel/core_pattern', 'w')\n\
         err('hostname_sysctl_w', open, '/proc/sys/kernel/hostname', 'w')\n\
         err('drop_caches_w', open, '/proc/sys/vm/drop_caches', 'w')\n\
         kv('core_pattern_readable', len(open('/proc/sys/kernel/core_pattern').read()) > 0)\n",
    )
    .run();
    run.assert_ok();
    run.checks()
        .os_errno("sysrq_trigger_w", sysrq_expected)
        .os_errno("core_pattern_w", libc::EROFS)
        .os_errno("hostname_sysctl_w", libc::EROFS)
        .os_errno("drop_caches_w", libc::EROFS)
        .kv_eq("core_pattern_readable", "True")
        .finish();
}

#[test]
fn escape_proc_only_jail_pids() {
    let run = Job::probe(
        "kv('pids', *sorted(int(n) for n in os.listdir('/proc') if n.isdigit()))\n\
         kv('mypid', os.getpid())\n\
         kv('ppid', os.getppid())\n",
    )
    .run();
    run.assert_ok();
    // A python forked in place of the first takes the namespace's next pid;
    // the first, killed and reaped, has left no trace.
    let me = if prims_tests::harness::in_place_mode() {
        "3"
    } else {
        "2"
    };
    run.checks()
        .kv_eq("pids", &format!("1 {me}"))
        .kv_eq("mypid", me)
        // A forked python's parent is outside its pid namespace (the
        // architecture guide's "Fork templates").
        .kv_eq(
            "ppid",
            if prims_tests::harness::forked_mode() {
                "0"
            } else {
                "1"
            },
        )
        .finish();
}

/// Not a catalogue row: the cgroup namespace should hide where the job sits
/// in the host hierarchy, so every line of /proc/self/cgroup reads `/`.
#[test]
fn escape_proc_cgroup_namespace_hides_host_path() {
    let run = Job::probe(
        "for _l in open('/proc/self/cgroup'):\n    print('CG', _l.rstrip(), flush=True)\n\
         kv('cgroup_paths', *sorted(set(l.rstrip().split(':', 2)[2] for l in open('/proc/self/cgroup'))))\n",
    )
    .run();
    run.assert_ok();
    run.checks().kv_eq("cgroup_paths", "/").finish();
}

#[test]
fn escape_proc_sys_fs_cgroup_absent() {
    let run = Job::probe(
        "err('stat_sys_fs_cgroup', os.stat, '/sys/fs/cgroup')\n\
         err('stat_sys', os.stat, '/sys')\n",
    )
    .run();
    run.assert_ok();
    run.checks()
        .os_errno("stat_sys_fs_cgroup", libc::ENOENT)
        .os_errno("stat_sys", libc::ENOENT)
        .finish();
}

/// Not a catalogue row: the kernel command line and the boot id name the
/// host and tell its boots apart. The jail reads an empty command line and a
/// boot id of its own, well-formed, that it cannot overwrite.
#[test]
fn escape_proc_host_cmdline_and_boot_id_masked() {
    require_root();
    let host_cmdline = std::fs::read_to_string("/proc/cmdline").unwrap();
    let host_boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    assert!(
        !host_cmdline.trim().is_empty(),
        "pairing: the host has a kernel command line"
    );
    let run = Job::probe(
        "kv('cmdline', repr(open('/proc/cmdline').read()))\n\
         kv('boot_id', open('/proc/sys/kernel/random/boot_id').read().strip())\n\
         kv('boot_id_lines', len(open('/proc/sys/kernel/random/boot_id').read().splitlines()))\n\
         err('cmdline_w', open, '/proc/cmdline', 'w')\n\
         err('boot_id_w', open, '/proc/sys/kernel/random/boot_id', 'w')\n",
    )
    .run();
    run.assert_ok();
    let boot_id = run.kv("boot_id").unwrap_or_default();
    let fields: Vec<&str> = boot_id.split('-').collect();
    run.checks()
        .kv_eq("cmdline", "''")
        .kv_eq("boot_id_lines", "1")
        .check(
            boot_id != host_boot_id.trim(),
            format!("the jail's boot id {boot_id} is not the host's"),
        )
        .check(
            fields.iter().map(|f| f.len()).collect::<Vec<_>>() == [8, 4, 4, 4, 12]
                && fields[2].starts_with('4')
                && boot_id.bytes().all(|b| b == b'-' || b.is_ascii_hexdigit()),
            format!("the jail's boot id {boot_id:?} is a version 4 UUID"),
        )
        .os_errno("cmdline_w", libc::EROFS)
        .os_errno("boot_id_w", libc::EROFS)
        .finish();
}

// ------------------------------------------------------------- host files

#[test]
fn escape_host_files_invisible() {
    require_root();
    let m = unique("marker");
    let var_marker = format!("/var/tmp/{m}");
    let root_marker = format!("/root/{m}");
    std::fs::write(&var_marker, "secret").unwrap();
    std::fs::write(&root_marker, "secret").unwrap();
    let other_ws = workspace_dir();
    std::fs::create_dir_all(other_ws.path().join("output")).unwrap();
    std::fs::write(other_ws.path().join("output/secret.txt"), "secret").unwrap();
    std::fs::set_permissions(
        other_ws.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let other = other_ws.path().to_str().unwrap().to_string();
    let this_repo = env!("CARGO_MANIFEST_DIR");
    for p in [
        "/etc/shadow",
        "/root",
        &var_marker,
        &root_marker,
        &other,
        this_repo,
    ] {
        assert!(Path::new(p).exists(), "pairing: {p} exists on the host");
    }
    let code = format!(
        "err('etc_shadow', open, '/etc/shadow', 'rb')\n\
         err('root_dir', os.listdir, '/root')\n\
         err('var_tmp_marker', open, {vm}, 'rb')\n\
         err('root_marker', open, {rm}, 'rb')\n\
         err('other_workspace', os.listdir, {ow})\n\
         err('other_workspace_file', open, {ow} + '/output/secret.txt', 'rb')\n\
         err('this_repo', os.listdir, {repo})\n",
        vm = py_str(&var_marker),
        rm = py_str(&root_marker),
        ow = py_str(&other),
        repo = py_str(this_repo),
    );
    let run = Job::probe(&code).run();
    let _ = std::fs::remove_file(&var_marker);
    let _ = std::fs::remove_file(&root_marker);
    run.assert_ok();
    run.checks()
        .os_errno("etc_shadow", libc::ENOENT)
        .os_errno("root_dir", libc::ENOENT)
        .os_errno("var_tmp_marker", libc::ENOENT)
        .os_errno("root_marker", libc::ENOENT)
        .os_errno("other_workspace", libc::ENOENT)
        .os_errno("other_workspace_file", libc::ENOENT)
        .os_errno("this_repo", libc::ENOENT)
        .finish();
}

// ------------------------------------------------------------------- the root

/// `ls /` lists the jail's root as a notebook user expects, and that is all
/// the listing grants: the root holds only mount points (and the links to
/// them), nothing in it can be made, and no file is read that was not
/// readable before.
#[test]
fn escape_root_lists_only_mount_points() {
    let code = r#"
_names = sorted(os.listdir('/'))
kv('root_has', *[n for n in ('dev', 'etc', 'proc', 'tmp', 'usr', 'venv', 'workspace') if n in _names])
def _plain(n):
    p = '/' + n
    # /etc is the jailer's few files when no /etc is bound: read under a
    # rule of its own, as before.
    if n == 'etc' or os.path.islink(p) or os.path.ismount(p):
        return False
    # A directory of the root's own tmpfs that leads to a mount point.
    return not all(os.path.ismount(os.path.join(d, e)) or os.path.islink(os.path.join(d, e))
                   for d, subdirs, files in os.walk(p) for e in subdirs + files
                   if not os.path.ismount(d))
kv('root_plain', *[n for n in _names if _plain(n)])
err('create_in_root', open, '/planted', 'w')
err('mkdir_in_root', os.mkdir, '/planted')
err('link_in_root', os.symlink, '/workspace', '/planted')
"#;
    let run = Job::probe(code).run();
    run.assert_ok();
    run.checks()
        .kv_eq("root_has", "dev etc proc tmp usr venv workspace")
        .kv_eq("root_plain", "")
        .os_errno("create_in_root", libc::EROFS)
        .os_errno("mkdir_in_root", libc::EROFS)
        .os_errno("link_in_root", libc::EROFS)
        .finish();
}
