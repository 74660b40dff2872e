//! Python probe bodies shared by the jail tests and the host control test.
//! Each one only makes calls that are harmless when run as root on the host
//! (garbage arguments that the kernel rejects before acting), so the control
//! test can show the jail, not the arguments, produces the EPERM.
//!
//! A probe names its call and gives the number as the kernel's table has
//! it, independently of `prims-syscalls`; the unit tests below hold the two
//! against each other, and check that the probes cover the jail's
//! always-denied list.

/// The names of the `sc(...)` probes in `body`, in order: what each prints
/// on its `SC` line.
pub fn sc_names(body: &str) -> Vec<&str> {
    body.lines()
        .filter_map(|l| sc_call(l).map(|(name, _)| name))
        .collect()
}

/// `(name, number as written)` of a line `sc("name", number, ...)`.
fn sc_call(line: &str) -> Option<(&str, &str)> {
    let rest = line.trim_start().strip_prefix("sc(\"")?;
    let (name, rest) = rest.split_once('"')?;
    let nr = rest.strip_prefix(',')?.split(',').next()?.trim();
    Some((name, nr.trim_end_matches(')')))
}

/// Nested namespaces. Every `clone` also sets `CLONE_SIGHAND` without
/// `CLONE_VM`, which the kernel rejects with EINVAL before it looks at
/// permissions: EPERM can only come from seccomp. `unshare` comes last
/// because on the host it succeeds and moves the prober into a new userns.
pub const NESTED_NS: &str = r#"
sc("setns_newuser", 308, -1, 0x10000000)
for _n, _f in [("newns", 0x20000), ("newcgroup", 0x02000000), ("newuts", 0x04000000),
               ("newipc", 0x08000000), ("newuser", 0x10000000), ("newpid", 0x20000000),
               ("newnet", 0x40000000)]:
    sc("clone_" + _n, 56, _f | 0x800 | 17, 0, 0, 0, 0)
sc("clone3", 435, W, 88)
sc("unshare_newuser", 272, 0x10000000)
"#;

/// The mount family, with a wrong pointer for every path.
pub const MOUNT: &str = r#"
sc("mount", 165, W, W, W, 0, 0)
sc("umount2", 166, W, 0)
sc("pivot_root", 155, W, W)
sc("chroot", 161, W)
sc("open_tree", 428, -1, W, 0)
sc("move_mount", 429, -1, W, -1, W, 0)
sc("fsopen", 430, W, 0)
sc("fsconfig", 431, -1, 0, 0, 0, 0)
sc("fsmount", 432, -1, 0, 0)
sc("fspick", 433, -1, W, 0)
sc("mount_setattr", 442, -1, W, 0, W, 0)
"#;

/// The kernel-surface row of the catalogue.
pub const KERNEL_SURFACE: &str = r#"
sc("io_uring_setup", 425, 1, W)
sc("io_uring_enter", 426, -1, 0, 0, 0, 0, 0)
sc("io_uring_register", 427, -1, 0, 0, 0)
sc("userfaultfd", 323, 0xffff0000)
sc("perf_event_open", 298, W, 0, -1, -1, 0)
sc("bpf", 321, 0, W, 72)
sc("keyctl", 250, 0xffff, 0, 0, 0, 0)
sc("add_key", 248, W, W, 0, 0, 0)
sc("request_key", 249, W, W, 0, 0)
sc("kexec_load", 246, 0, 1000, 0, 0)
sc("kexec_file_load", 320, -1, -1, 0, W, 0)
sc("init_module", 175, W, 0, W)
sc("finit_module", 313, -1, W, 0)
sc("delete_module", 176, W, 0)
sc("reboot", 169, 0, 0, 0, 0)
sc("open_by_handle_at", 304, -1, W, 0)
sc("name_to_handle_at", 303, -1, W, W, W, 0)
"#;

/// The rest of the deny list in jail-hardening.md (host-safe arguments;
/// `vhangup` is jail-only, see [`DENY_REST_JAIL_ONLY`]).
pub const DENY_REST: &str = r#"
sc("process_vm_writev", 311, os.getpid(), 0, 0, 0, 0, 1)
sc("pidfd_getfd", 438, -1, 0, 0)
sc("swapon", 167, W, 0)
sc("swapoff", 168, W)
sc("syslog", 103, 0xff, 0, 0)
sc("acct", 163, W)
sc("quotactl", 179, 0, W, 0, 0)
sc("quotactl_fd", 443, -1, 0, 0, 0)
sc("settimeofday", 164, W, W)
sc("clock_settime", 227, 0xffff, W)
sc("clock_adjtime", 305, 0xffff, W)
sc("adjtimex", 159, W)
sc("sethostname", 170, W, 1000)
sc("setdomainname", 171, W, 1000)
sc("iopl", 172, 4)
sc("ioperm", 173, 0x10000, 1, 1)
sc("modify_ldt", 154, 0xff, 0, 0)
sc("lookup_dcookie", 212, 0, 0, 0)
sc("uselib", 134, W)
sc("ustat", 136, 0, W)
sc("sysfs", 139, 0xff, 0, 0)
sc("fanotify_init", 300, 0xffffffff, 0)
sc("mq_open", 240, W, 0, 0, 0)
sc("mq_unlink", 241, W)
sc("mbind", 237, 0, 0, 0xff, 0, 0, 0)
sc("set_mempolicy", 238, 0xff, 0, 0)
sc("migrate_pages", 256, -1, 0, 0, 0)
sc("move_pages", 279, -1, 0, 0, 0, 0, 0)
"#;
/// Denied calls that must never run on the host as root.
pub const DENY_REST_JAIL_ONLY: &str = r#"
sc("vhangup", 153)
"#;

/// Asynchronous I/O (its contexts count against the host-wide
/// `fs.aio-max-nr`), `memfd_secret`, and `prlimit64` aimed at pid 1, also
/// with garbage in the upper half of the pid, which the kernel ignores.
/// The host answers EFAULT or EINVAL (an invalid resource; no secretmem flag
/// is valid).
pub const AIO_SECRETMEM_PRLIMIT: &str = r#"
sc("io_setup", 206, 0, W)
sc("io_destroy", 207, 0)
sc("io_submit", 209, 0, 1, W)
sc("io_cancel", 210, 0, W, W)
sc("io_getevents", 208, 0, 0, 1, W, 0)
sc("io_pgetevents", 333, 0, 0, 1, W, 0, 0)
sc("memfd_secret", 447, 0xffffffff)
sc("prlimit64_init", 302, 1, 0xffff, 0, 0)
sc("prlimit64_init_hi32", 302, (1 << 32) | 1, 0xffff, 0, 0)
"#;

/// ioctl TIOCSTI/TIOCLINUX, including bubblewrap's CVE-2019-10063 form
/// with garbage in the upper 32 bits, on fd -1 so the host sees EBADF.
pub const TIOCSTI_HOST: &str = r#"
sc("tiocsti_hi", 16, -1, (1 << 32) | 0x5412, W)
sc("tiocsti", 16, -1, 0x5412, W)
sc("tioclinux", 16, -1, 0x541C, W)
"#;

/// Sockets of families the default policy forbids.
pub const SOCKETS: &str = r#"
sc("af_packet", 41, 17, 3, 0)
sc("af_vsock", 41, 40, 1, 0)
sc("af_alg", 41, 38, 5, 0)
sc("af_netlink", 41, 16, 3, 0)
sc("af_inet", 41, 2, 1, 0)
sc("af_inet6", 41, 10, 1, 0)
sc("af_unix", 41, 1, 1, 0)
sc("inet_tcp_flags", 41, 2, 1 | 0x800 | 0x80000, 6)
sc("inet_udp", 41, 2, 2, 17)
sc("inet6_udp_flags", 41, 10, 2 | 0x800 | 0x80000, 0)
sc("inet_raw", 41, 2, 3, 1)
sc("inet6_raw", 41, 10, 3, 58)
sc("inet_icmp_dgram", 41, 2, 2, 1)
sc("inet6_icmp_dgram", 41, 10, 2, 58)
sc("inet_sctp", 41, 2, 1, 132)
sc("inet_seqpacket", 41, 2, 5, 0)
sc("inet_packet_type", 41, 2, 10, 0)
sc("inet_unknown_flag", 41, 2, 1 | 0x40, 0)
"#;

/// The x32 bypass: getpid with the x32 bit set.
pub const X32: &str = r#"
sc("x32_getpid", 0x40000000 | 39)
"#;

/// i386 `int 0x80` from an RWX page: prints `mapped`, then `returned`
/// with the result if the process survives, or `mmap_failed <errno>`.
pub const INT80: &str = r#"
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_addr = libc.mmap(None, 4096, 7, 0x22, -1, 0)
if _addr is None or _addr == ctypes.c_void_p(-1).value:
    print("mmap_failed", ctypes.get_errno(), flush=True)
else:
    _code = bytes([0xb8, 20, 0, 0, 0, 0xcd, 0x80, 0xc3])  # mov eax,20 (i386 getpid); int 0x80; ret
    ctypes.memmove(_addr, _code, len(_code))
    print("mapped", flush=True)
    _f = ctypes.CFUNCTYPE(ctypes.c_int)(_addr)
    print("returned", _f(), os.getpid(), flush=True)
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use prims_syscalls::ALWAYS_DENIED;
    use std::collections::BTreeSet;

    const BODIES: [&str; 9] = [
        NESTED_NS,
        MOUNT,
        KERNEL_SURFACE,
        DENY_REST,
        DENY_REST_JAIL_ONLY,
        AIO_SECRETMEM_PRLIMIT,
        TIOCSTI_HOST,
        SOCKETS,
        X32,
    ];

    /// Always-denied calls probed in `escape_syscalls.rs` itself (the
    /// ptrace row), not through a body here.
    const PROBED_ELSEWHERE: [&str; 2] = ["ptrace", "process_vm_readv"];

    /// `(name, number)` of every probe whose number is written in decimal.
    fn decimal_probes() -> Vec<(&'static str, i64)> {
        BODIES
            .iter()
            .flat_map(|b| b.lines())
            .filter_map(sc_call)
            .filter_map(|(name, nr)| Some((name, nr.parse().ok()?)))
            .collect()
    }

    #[test]
    fn sc_names_lists_each_probe_in_order() {
        let body = "sc(\"a\", 1, W)\n    sc(\"b_c\", 2)\nsc(\"d_\" + n, 3)\nkv(\"e\", 4)\n";
        assert_eq!(sc_names(body), ["a", "b_c"]);
        assert_eq!(sc_names(DENY_REST_JAIL_ONLY), ["vhangup"]);
        assert_eq!(sc_names(X32), ["x32_getpid"]);
        // The clone probes build their names in a loop.
        assert_eq!(
            sc_names(NESTED_NS),
            ["setns_newuser", "clone3", "unshare_newuser"]
        );
        let mount = sc_names(MOUNT);
        assert!(mount.iter().all(|n| ALWAYS_DENIED.contains(n)));
    }

    /// The escape tests check the names `sc_names` finds, so a probe it
    /// cannot parse would go unchecked: every `sc(` must be found (the
    /// nested-namespace body builds its clone names in a loop).
    #[test]
    fn sc_names_finds_every_probe() {
        for body in BODIES.iter().filter(|b| **b != NESTED_NS) {
            assert_eq!(
                sc_names(body).len(),
                body.matches("sc(").count(),
                "a probe line sc_names cannot parse in:\n{body}"
            );
        }
    }

    #[test]
    fn probe_numbers_agree_with_the_syscall_table() {
        let probes = decimal_probes();
        assert!(probes.len() > 70, "only {} probes parsed", probes.len());
        for (name, nr) in probes {
            let called = prims_syscalls::name(nr);
            assert!(called.is_some(), "probe {name} calls {nr}, no syscall");
            if let Some(table_nr) = prims_syscalls::number(name) {
                assert_eq!(nr, table_nr, "probe {name} calls {called:?}");
            }
        }
    }

    #[test]
    fn the_probes_cover_the_always_denied_list() {
        let probed: BTreeSet<i64> = decimal_probes().into_iter().map(|(_, nr)| nr).collect();
        for name in prims_syscalls::ALWAYS_DENIED {
            let nr = prims_syscalls::number(name).unwrap();
            assert!(
                probed.contains(&nr) || PROBED_ELSEWHERE.contains(name),
                "no escape probe calls {name} ({nr})"
            );
        }
        for name in PROBED_ELSEWHERE {
            assert!(ALWAYS_DENIED.contains(&name), "{name}");
        }
    }
}
