//! The syscall rows of the escape catalogue of shared/notes/jail-hardening.md:
//! nested user namespaces, the mount family, the x32 bypass, i386 `int 0x80`,
//! the kernel surface, ptrace and TIOCSTI, plus the rest of the deny list and
//! the personality filter. Every row must fail inside the jail. Each test is
//! named for its escape class.
//!
//! Syscall probes follow bubblewrap's try-syscall technique: arguments are
//! NULL or garbage, chosen so that the kernel itself would answer EFAULT,
//! EINVAL or EBADF (see `control_host_probes_are_never_eperm`, which runs the
//! same probes on the host as root). EPERM therefore means seccomp stopped
//! the call.
//!
//! The other escape classes live in `escape_network.rs`,
//! `escape_filesystem.rs`, `escape_binds.rs` and `escape_process.rs`.

use prims_tests::*;

const EPERM: i32 = libc::EPERM;

fn probe_all_eperm(body: &str, names: &[&str]) {
    let run = Job::probe(body).run();
    run.assert_ok();
    let mut c = run.checks();
    for n in names {
        c.sc_errno(n, EPERM);
    }
    c.finish();
}

// ---------------------------------------------------------------- control

/// Runs every host-safe probe on the host, as root, outside the jail: none of
/// them may answer EPERM, so an EPERM in the jail can only come from the jail.
#[test]
fn control_host_probes_are_never_eperm() {
    require_root();
    let code = format!(
        "{PY_PRELUDE}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\nsc('ptrace_peek', 101, 2, -1, 0, 0)\nsc('process_vm_readv', 310, os.getpid(), 0, 0, 0, 0, 1)\n",
        probes::MOUNT,
        probes::KERNEL_SURFACE,
        probes::DENY_REST,
        probes::AIO_SECRETMEM_PRLIMIT,
        probes::TIOCSTI_HOST,
        probes::SOCKETS,
        probes::X32,
        "sc('personality', 135, 0x0400000)\nsc('personality_restore', 135, 0)",
        probes::NESTED_NS,
    );
    let out = host_python(&code);
    assert_eq!(out.code, Some(0), "host probe failed:\n{}", out.describe());
    let mut eperm = Vec::new();
    let mut n = 0;
    for l in out.stdout_str().lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() == 4 && f[0] == "SC" {
            n += 1;
            if f[3] == "1" && f[2] == "-1" {
                eperm.push(l.to_string());
            }
        }
    }
    assert!(
        n > 80,
        "too few probes ran on the host:\n{}",
        out.describe()
    );
    assert!(
        eperm.is_empty(),
        "these probes answer EPERM even without the jail, so a jail EPERM proves nothing: {eperm:?}\n{}",
        out.describe()
    );
    // The x32 call is ENOSYS on the host (no X32 ABI), not a kill.
    assert!(
        out.stdout_str().contains("SC x32_getpid -1 38"),
        "{}",
        out.describe()
    );
}

// ---------------------------------------------------------- nested userns

#[test]
fn escape_nested_userns_unshare_setns_clone_eperm() {
    let run = Job::probe(&format!(
        "{}\n_pid = os.fork()\nif _pid == 0:\n    os._exit(7)\nkv('fork_child_exit', os.waitstatus_to_exitcode(os.waitpid(_pid, 0)[1]))\n",
        probes::NESTED_NS
    ))
    .run();
    run.assert_ok();
    let mut c = run.checks();
    c.sc_errno("unshare_newuser", EPERM)
        .sc_errno("setns_newuser", EPERM);
    for n in [
        "newns",
        "newcgroup",
        "newuts",
        "newipc",
        "newuser",
        "newpid",
        "newnet",
    ] {
        c.sc_errno(&format!("clone_{n}"), EPERM);
    }
    // Control inside the jail: a plain fork (clone without CLONE_NEW*) works.
    c.kv_eq("fork_child_exit", "7");
    c.finish();
}

#[test]
fn escape_nested_userns_clone3_enosys() {
    let run = Job::probe(probes::NESTED_NS).run();
    run.assert_ok();
    run.checks().sc_errno("clone3", libc::ENOSYS).finish();
}

// ------------------------------------------------------------------ mount

#[test]
fn escape_mount_family_eperm() {
    probe_all_eperm(probes::MOUNT, &probes::sc_names(probes::MOUNT));
}

// ------------------------------------------------------------- x32 bypass

#[test]
fn escape_x32_bypass_sigsys() {
    let run = Job::probe(&format!(
        "print('before', flush=True)\n{}\nprint('survived', flush=True)\n",
        probes::X32
    ))
    .run();
    let mut c = run.checks();
    c.check(
        run.status() == "signal",
        format!("status {:?} (expected \"signal\")", run.status()),
    )
    .check(
        run.signal() == Some(libc::SIGSYS as i64),
        format!("signal {:?} (expected 31 SIGSYS)", run.signal()),
    )
    .check(
        run.stdout().contains("before") && !run.stdout().contains("survived"),
        "the process printed `before` and died at the x32 call",
    )
    .check(
        run.prims_exit() == Some(128 + libc::SIGSYS),
        format!("prims exit {:?} (expected 159)", run.prims_exit()),
    );
    c.finish();
}

// ------------------------------------------------------- i386 int 0x80

#[test]
fn escape_i386_int80_killed() {
    require_root();
    // Pair: on the host (no seccomp) the same code returns from int 0x80,
    // which shows IA32 emulation is on, so the jail must kill with SIGSYS.
    let host = host_python(&format!("{PY_PRELUDE}\n{}", probes::INT80));
    let host_returns = host.stdout_str().contains("returned");
    let expected_signal = if host_returns {
        libc::SIGSYS
    } else {
        assert_eq!(
            host.signal,
            Some(libc::SIGSEGV),
            "host int 0x80 neither returned nor SIGSEGV'd:\n{}",
            host.describe()
        );
        libc::SIGSEGV
    };
    let run = Job::probe(probes::INT80).run();
    if let Some(l) = run.lines().iter().find(|l| l.starts_with("mmap_failed")) {
        // The jail refuses RWX pages: int 0x80 cannot be reached this way.
        let e: i32 = l
            .split_whitespace()
            .nth(1)
            .unwrap_or("0")
            .parse()
            .unwrap_or(0);
        assert!(
            e == libc::EPERM || e == libc::EACCES,
            "mmap RWX failed with unexpected errno {e}:\n{}",
            run.describe()
        );
        eprintln!("note: the jail refuses PROT_EXEC|PROT_WRITE mappings ({l})");
        return;
    }
    let mut c = run.checks();
    c.check(
        run.stdout().contains("mapped"),
        "the RWX page was mapped and the code called",
    )
    .check(
        !run.stdout().contains("returned"),
        "int 0x80 did not return",
    )
    .check(
        run.status() == "signal",
        format!("status {:?} (expected \"signal\")", run.status()),
    )
    .check(
        run.signal() == Some(expected_signal as i64),
        format!(
            "signal {:?} (expected {expected_signal}; host int 0x80 returned: {host_returns})",
            run.signal()
        ),
    );
    c.finish();
}

// --------------------------------------------------------- kernel surface

#[test]
fn escape_kernel_surface_eperm() {
    probe_all_eperm(
        probes::KERNEL_SURFACE,
        &probes::sc_names(probes::KERNEL_SURFACE),
    );
}

/// Not a catalogue row: the rest of the deny list in jail-hardening.md.
#[test]
fn escape_deny_list_rest_eperm() {
    let body = format!("{}{}", probes::DENY_REST, probes::DENY_REST_JAIL_ONLY);
    probe_all_eperm(&body, &probes::sc_names(&body));
}

/// Not a catalogue row: asynchronous I/O (whose contexts count against the
/// host-wide `fs.aio-max-nr`), `memfd_secret`, and `prlimit64` on any
/// process but the caller. The real calls as well as the garbage ones; pid
/// 0, which glibc's getrlimit and setrlimit use, keeps working.
#[test]
fn escape_aio_secretmem_prlimit_eperm() {
    let run = Job::probe(&format!(
        "{}\n\
         import resource\n\
         _ctx = ctypes.c_ulong(0)\n\
         sc('io_setup_65536', 206, 65536, ctypes.addressof(_ctx))\n\
         sc('memfd_secret_0', 447, 0)\n\
         err('prlimit_init', resource.prlimit, 1, resource.RLIMIT_NOFILE)\n\
         err('prlimit_own_pid', resource.prlimit, os.getpid(), resource.RLIMIT_NOFILE)\n\
         err('prlimit_self', resource.prlimit, 0, resource.RLIMIT_NOFILE)\n\
         err('setrlimit_self', resource.setrlimit, resource.RLIMIT_NOFILE, (64, 128))\n\
         kv('nofile', *resource.getrlimit(resource.RLIMIT_NOFILE))\n",
        probes::AIO_SECRETMEM_PRLIMIT
    ))
    .run();
    run.assert_ok();
    let mut c = run.checks();
    for n in probes::sc_names(probes::AIO_SECRETMEM_PRLIMIT) {
        c.sc_errno(n, EPERM);
    }
    c.sc_errno("io_setup_65536", EPERM)
        .sc_errno("memfd_secret_0", EPERM)
        .os_errno("prlimit_init", EPERM)
        // Any pid but 0 is refused, even the caller's own.
        .os_errno("prlimit_own_pid", EPERM)
        .os_ok("prlimit_self")
        .os_ok("setrlimit_self")
        .kv_eq("nofile", "64 128");
    c.finish();
}

/// Not a catalogue row: a call that policy's `seccomp.extra_deny` names is
/// denied outright, even one the jail otherwise only filters by argument.
#[test]
fn escape_extra_deny_overrides_argument_filter() {
    let run = Job::probe(
        "import resource\n\
         err('getrlimit_self', resource.getrlimit, resource.RLIMIT_NOFILE)\n",
    )
    .policy(policy_with(
        "10s",
        "[seccomp]\nextra_deny = [\"prlimit64\"]\n",
    ))
    .run();
    run.assert_ok();
    // glibc's getrlimit is prlimit64(0, ...), which the argument filter allows.
    run.checks().os_errno("getrlimit_self", EPERM).finish();
}

/// Not a catalogue row: the personality argument filter of the contract.
#[test]
fn escape_personality_eperm() {
    let run = Job::probe(
        "sc('personality_read_implies_exec', 135, 0x0400000)\n\
         sc('personality_addr_no_randomize', 135, 0x0040000)\n\
         sc('personality_query', 135, 0xffffffff)\n\
         sc('personality_linux', 135, 0)\n",
    )
    .run();
    run.assert_ok();
    run.checks()
        .sc_errno("personality_read_implies_exec", EPERM)
        .sc_errno("personality_addr_no_randomize", EPERM)
        .sc_ok("personality_query")
        .sc_ok("personality_linux")
        .finish();
}

// ----------------------------------------------------------------- ptrace

#[test]
fn escape_ptrace_eperm() {
    let run = Job::probe(
        "sc('ptrace_traceme', 101, 0, 0, 0, 0)\n\
         sc('ptrace_attach_init', 101, 16, 1, 0, 0)\n\
         sc('process_vm_readv', 310, os.getpid(), 0, 0, 0, 0, 1)\n\
         sc('process_vm_readv_init', 310, 1, 0, 0, 0, 0, 0)\n",
    )
    .run();
    run.assert_ok();
    run.checks()
        .sc_errno("ptrace_traceme", EPERM)
        .sc_errno("ptrace_attach_init", EPERM)
        .sc_errno("process_vm_readv", EPERM)
        .sc_errno("process_vm_readv_init", EPERM)
        .finish();
}

// ---------------------------------------------------------------- TIOCSTI

#[test]
fn escape_tiocsti_eperm_and_no_tty() {
    let run = Job::probe(
        "sc('tiocsti_hi', 16, 0, (1 << 32) | 0x5412, W)\n\
         sc('tiocsti', 16, 0, 0x5412, W)\n\
         sc('tioclinux', 16, 0, 0x541C, W)\n\
         sc('tiocgwinsz', 16, 0, 0x5413, W)\n\
         err('open_dev_tty', open, '/dev/tty', 'rb')\n\
         kv('isatty', os.isatty(0), os.isatty(1), os.isatty(2))\n",
    )
    .run();
    run.assert_ok();
    run.checks()
        .sc_errno("tiocsti_hi", EPERM)
        .sc_errno("tiocsti", EPERM)
        .sc_errno("tioclinux", EPERM)
        // Control: an unfiltered ioctl reaches the kernel, which says fd 0
        // is no terminal.
        .sc_errno("tiocgwinsz", libc::ENOTTY)
        .os_errno("open_dev_tty", libc::ENOENT)
        .kv_eq("isatty", "False False False")
        .finish();
}
