//! The escape catalogue of shared/notes/jail-hardening.md: every row must
//! fail inside the jail. Each test is named for its escape class.
//!
//! Syscall probes follow bubblewrap's try-syscall technique: arguments are
//! NULL or garbage, chosen so that the kernel itself would answer EFAULT,
//! EINVAL or EBADF (see `control_host_probes_are_never_eperm`, which runs the
//! same probes on the host as root). EPERM therefore means seccomp stopped
//! the call.

use prims_tests::*;
use std::io::Write as _;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

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
        "{PY_PRELUDE}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\nsc('ptrace_peek', 101, 2, -1, 0, 0)\nsc('process_vm_readv', 310, os.getpid(), 0, 0, 0, 0, 1)\n",
        probes::MOUNT,
        probes::KERNEL_SURFACE,
        probes::DENY_REST,
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
        n > 60,
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
    probe_all_eperm(probes::MOUNT, probes::MOUNT_NAMES);
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
    probe_all_eperm(probes::KERNEL_SURFACE, probes::KERNEL_SURFACE_NAMES);
}

/// Not a catalogue row: the rest of the deny list in jail-hardening.md.
#[test]
fn escape_deny_list_rest_eperm() {
    let mut names: Vec<&str> = probes::DENY_REST_NAMES.to_vec();
    names.push("vhangup");
    probe_all_eperm(
        &format!("{}{}", probes::DENY_REST, probes::DENY_REST_JAIL_ONLY),
        &names,
    );
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

// ---------------------------------------------------------------- sockets

#[test]
fn escape_sockets_default_policy_eperm() {
    let run = Job::probe(probes::SOCKETS).run();
    run.assert_ok();
    run.checks()
        .sc_errno("af_packet", EPERM)
        .sc_errno("af_vsock", EPERM)
        .sc_errno("af_alg", EPERM)
        .sc_errno("af_netlink", EPERM)
        .sc_errno("af_inet", EPERM)
        .sc_errno("af_inet6", EPERM)
        .sc_ok("af_unix")
        .finish();
}

#[test]
fn escape_sockets_loopback_mode_only_inet_added() {
    let run = Job::probe(probes::SOCKETS)
        .policy(policy_with("10s", "[network]\nmode = \"loopback\"\n"))
        .run();
    run.assert_ok();
    run.checks()
        .sc_errno("af_packet", EPERM)
        .sc_errno("af_vsock", EPERM)
        .sc_errno("af_alg", EPERM)
        .sc_errno("af_netlink", EPERM)
        .sc_ok("af_inet")
        .sc_ok("af_inet6")
        .sc_ok("af_unix")
        .finish();
}

// ----------------------------------------------------------------- egress

const NET_IFACES_PY: &str = r#"
import socket, fcntl, struct
_names = [l.split(':')[0].strip() for l in open('/proc/net/dev').read().splitlines()[2:]]
kv('netdev', *sorted(_names))
# socket.if_nameindex() needs a netlink socket, which seccomp refuses; list
# the interfaces by index with SIOCGIFNAME on an AF_UNIX socket instead.
err('if_nameindex', socket.if_nameindex)
_s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
_found = []
for _i in range(1, 65):
    try:
        _r = fcntl.ioctl(_s, 0x8910, struct.pack('16si20x', b'', _i))
        _found.append('%d:%s' % (_i, _r[:16].rstrip(b'\0').decode()))
    except OSError as e:
        if e.errno != errno.ENODEV:
            _found.append('%d:errno%d' % (_i, e.errno))
kv('ifindex', *_found)
_r = fcntl.ioctl(_s, 0x8913, struct.pack('16sH14x', b'lo', 0))
kv('lo_up', struct.unpack('16sH14x', _r)[1] & 1)
"#;

fn host_interfaces() -> Vec<String> {
    std::fs::read_to_string("/proc/net/dev")
        .expect("host /proc/net/dev")
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next().map(|s| s.trim().to_string()))
        .collect()
}

#[test]
fn escape_egress_only_lo_interface() {
    require_root();
    let host = host_interfaces();
    assert!(
        host.iter().any(|i| i != "lo"),
        "pairing: the host has only lo ({host:?}), this test proves nothing here"
    );
    for (mode, up) in [("none", "0"), ("loopback", "1")] {
        let run = Job::probe(NET_IFACES_PY)
            .policy(policy_with(
                "10s",
                &format!("[network]\nmode = \"{mode}\"\n"),
            ))
            .run();
        run.assert_ok();
        run.checks()
            .kv_eq("netdev", "lo")
            .kv_eq("ifindex", "1:lo")
            .os_errno("if_nameindex", EPERM)
            .check(
                run.kv("lo_up").as_deref() == Some(up),
                format!(
                    "mode {mode}: lo up flag {:?} (expected {up}: none leaves lo down, loopback brings it up)",
                    run.kv("lo_up")
                ),
            )
            .finish();
    }
}

/// First non-loopback IPv4 address of the host.
fn host_ipv4() -> Option<std::net::Ipv4Addr> {
    let mut ifap: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills ifap; we walk the list read-only and free it.
    unsafe {
        if libc::getifaddrs(&mut ifap) != 0 {
            return None;
        }
        let mut p = ifap;
        let mut found = None;
        while !p.is_null() {
            let a = (*p).ifa_addr;
            if !a.is_null() && (*a).sa_family as i32 == libc::AF_INET {
                let sin = &*(a as *const libc::sockaddr_in);
                let ip = std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                if !ip.is_loopback() {
                    found = Some(ip);
                    break;
                }
            }
            p = (*p).ifa_next;
        }
        libc::freeifaddrs(ifap);
        found
    }
}

#[test]
fn escape_egress_loopback_mode_host_listeners_unreachable() {
    require_root();
    let lo_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind host lo");
    let lo_port = lo_listener.local_addr().unwrap().port();
    let any_listener = std::net::TcpListener::bind("0.0.0.0:0").expect("bind host any");
    let any_port = any_listener.local_addr().unwrap().port();
    let host_ip = host_ipv4().expect("the host has a non-loopback IPv4 address");
    // Pair: from the host both listeners are reachable.
    for addr in [
        format!("127.0.0.1:{lo_port}"),
        format!("{host_ip}:{any_port}"),
    ] {
        std::net::TcpStream::connect(&addr)
            .unwrap_or_else(|e| panic!("pairing: host cannot connect to {addr}: {e}"));
    }
    let _ = lo_listener
        .accept()
        .expect("accept host pairing connection");
    let _ = any_listener
        .accept()
        .expect("accept host pairing connection");

    let code = format!(
        r#"
import socket
def conn(addr):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect(addr)
    finally:
        s.close()
err('host_lo_port', conn, ('127.0.0.1', {lo_port}))
err('host_ip_port', conn, ('{host_ip}', {any_port}))
err('public_ip', conn, ('1.1.1.1', 80))
_l = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
_l.bind(('127.0.0.1', 0))
_l.listen()
err('own_listener', conn, _l.getsockname())
"#
    );
    let run = Job::probe(&code)
        .policy(policy_with("15s", "[network]\nmode = \"loopback\"\n"))
        .run();
    run.assert_ok();
    lo_listener.set_nonblocking(true).unwrap();
    any_listener.set_nonblocking(true).unwrap();
    let lo_accept = lo_listener.accept();
    let any_accept = any_listener.accept();
    run.checks()
        .os_errno("host_lo_port", libc::ECONNREFUSED)
        .os_errno("host_ip_port", libc::ENETUNREACH)
        .os_errno("public_ip", libc::ENETUNREACH)
        // Control: the jail's own loopback works, so the refusal above is
        // isolation, not a broken stack.
        .os_ok("own_listener")
        .check(
            lo_accept.is_err(),
            format!("host lo listener received no connection ({lo_accept:?})"),
        )
        .check(
            any_accept.is_err(),
            format!("host 0.0.0.0 listener received no connection ({any_accept:?})"),
        )
        .finish();
}

fn host_nameserver() -> Option<String> {
    std::fs::read_to_string("/etc/resolv.conf")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("nameserver ").map(|s| s.trim().to_string()))
        .filter(|s| s.parse::<std::net::Ipv4Addr>().is_ok())
}

#[test]
fn escape_egress_dns_fails() {
    require_root();
    let ns = host_nameserver().unwrap_or_else(|| "8.8.8.8".to_string());
    // Pair: the host can send a datagram towards its nameserver.
    let udp = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    udp.send_to(b"x", format!("{ns}:53"))
        .unwrap_or_else(|e| panic!("pairing: host cannot send to {ns}:53: {e}"));
    let code = format!(
        r#"
import socket
try:
    _r = socket.getaddrinfo('example.com', 80)
    kv('dns_example', 'resolved', _r[0][4][0])
except socket.gaierror as e:
    kv('dns_example', 'gaierror')
    kv('dns_example_code', e.errno)
err('resolv_conf', open, '/etc/resolv.conf')
_u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
err('udp_to_nameserver', _u.sendto, b'x', ('{ns}', 53))
"#
    );
    let run = Job::probe(&code)
        .policy(policy_with("15s", "[network]\nmode = \"loopback\"\n"))
        .run();
    run.assert_ok();
    run.checks()
        .kv_eq("dns_example", "gaierror")
        .os_errno("resolv_conf", libc::ENOENT)
        .os_errno("udp_to_nameserver", libc::ENETUNREACH)
        .finish();
}

// ------------------------------------------------------------- supervisor

#[test]
fn escape_supervisor_unix_socket_path_invisible() {
    require_root();
    let mut paths = Vec::new();
    let mut listeners = Vec::new();
    for dir in ["/run", "/var/tmp", "/tmp"] {
        let p = format!("{dir}/{}.sock", unique("sup"));
        listeners.push(std::os::unix::net::UnixListener::bind(&p).expect("bind host socket"));
        // Pair: reachable on the host.
        std::os::unix::net::UnixStream::connect(&p).expect("pairing: host connect");
        paths.push(p);
    }
    let mut code = String::from(
        "import socket\ndef uconn(p):\n    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n    try:\n        s.connect(p)\n    finally:\n        s.close()\n",
    );
    for (i, p) in paths.iter().enumerate() {
        code += &format!(
            "err('stat_{i}', os.stat, {q})\nerr('connect_{i}', uconn, {q})\n",
            q = py_str(p)
        );
    }
    let run = Job::probe(&code).run();
    for p in &paths {
        let _ = std::fs::remove_file(p);
    }
    run.assert_ok();
    let mut c = run.checks();
    for i in 0..paths.len() {
        c.os_errno(&format!("stat_{i}"), libc::ENOENT)
            .os_errno(&format!("connect_{i}"), libc::ENOENT);
    }
    c.finish();
}

#[test]
fn escape_supervisor_abstract_socket_unreachable() {
    require_root();
    use std::os::linux::net::SocketAddrExt;
    let name = unique("abstract");
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = std::os::unix::net::UnixListener::bind_addr(&addr).expect("bind abstract");
    // Pair: the host reaches it.
    std::os::unix::net::UnixStream::connect_addr(&addr).expect("pairing: host connect");
    let _ = listener.accept().expect("pairing accept");
    let code = format!(
        "import socket\ndef uconn(p):\n    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n    try:\n        s.connect(p)\n    finally:\n        s.close()\nerr('abstract_connect', uconn, b'\\0' + {}.encode())\n",
        py_str(&name)
    );
    for mode in ["none", "loopback"] {
        let run = Job::probe(&code)
            .policy(policy_with(
                "10s",
                &format!("[network]\nmode = \"{mode}\"\n"),
            ))
            .run();
        run.assert_ok();
        listener.set_nonblocking(true).unwrap();
        let acc = listener.accept();
        run.checks()
            .os_errno("abstract_connect", libc::ECONNREFUSED)
            .check(
                acc.is_err(),
                format!("mode {mode}: the host listener got no connection ({acc:?})"),
            )
            .finish();
    }
}

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
    let code = r#"
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
"#;
    let run = Job::probe(code).run();
    // SAFETY: closing the fd opened above.
    unsafe { libc::close(leak_fd) };
    run.assert_ok();
    // listdir('/proc/self/fd') itself holds one directory fd, which is 3
    // when only 0, 1 and 2 are open.
    run.checks()
        .kv_eq("listdir", "0 1 2 3")
        .kv_eq("fstat_open", "0 1 2")
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
            "fd full null random stderr stdin stdout urandom zero",
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
    run.checks()
        .kv_eq("pids", "1 2")
        .kv_eq("mypid", "2")
        .kv_eq("ppid", "1")
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

// ------------------------------------------------------------ interpreter

#[test]
fn escape_interpreter_binary_not_writable() {
    // 'r+b' (O_RDWR, no O_TRUNC): the kernel checks permissions before the
    // mount, and the binary belongs to host root, unmapped in the jail, so
    // the answer is EACCES whether or not /usr is read-only.
    // 'wb' (O_TRUNC) and creating a file check the mount first: EROFS proves
    // the bind is read-only (without it the answer would be EACCES).
    let run = Job::probe(
        "err('python_rplus', open, '/usr/bin/python3.11', 'r+b')\n\
         err('python_wb', open, '/usr/bin/python3.11', 'wb')\n\
         err('usr_bin_create', open, '/usr/bin/prims-test-new', 'w')\n\
         err('venv_create', open, '/venv/prims-test-new', 'w')\n\
         err('venv_bin_create', open, '/venv/bin/prims-test-new', 'w')\n\
         kv('python_realpath', os.path.realpath('/venv/bin/python'))\n\
         kv('executable', sys.executable)\n",
    )
    .run();
    run.assert_ok();
    run.checks()
        .os_errno("python_rplus", libc::EACCES)
        .os_errno("python_wb", libc::EROFS)
        .os_errno("usr_bin_create", libc::EROFS)
        .os_errno("venv_create", libc::EROFS)
        .os_errno("venv_bin_create", libc::EROFS)
        .kv_eq("executable", "/venv/bin/python")
        .finish();
}

#[test]
fn escape_interpreter_pid1_exe_environ_unreadable() {
    let run = Job::probe(
        "err('pid1_exe', os.readlink, '/proc/1/exe')\n\
         err('pid1_environ', lambda: open('/proc/1/environ', 'rb').read())\n\
         err('pid1_mem', open, '/proc/1/mem', 'rb')\n\
         err('pid1_root', os.listdir, '/proc/1/root')\n",
    )
    .run();
    run.assert_ok();
    run.checks()
        .os_errno("pid1_exe", libc::EACCES)
        .os_errno("pid1_environ", libc::EACCES)
        .os_errno("pid1_mem", libc::EACCES)
        .os_errno("pid1_root", libc::EACCES)
        .finish();
}

/// Not a catalogue row, but the mechanism behind "interpreter": a path in
/// `filesystem.ro_binds` that the jail user owns on the host (so only the
/// read-only mount stops a write) must answer EROFS.
#[test]
fn escape_ro_bind_owned_by_jail_user_erofs() {
    require_root();
    let base = tempfile::Builder::new()
        .prefix("prims-test-robind-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let dir = base.path().join("data");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("file.txt"), "original").unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    std::fs::set_permissions(
        dir.join("file.txt"),
        std::os::unix::fs::PermissionsExt::from_mode(0o666),
    )
    .unwrap();
    std::fs::set_permissions(
        base.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let uid = 200_000;
    for p in [dir.clone(), dir.join("file.txt")] {
        std::os::unix::fs::chown(&p, Some(uid), Some(uid)).unwrap();
    }
    let d = dir.to_str().unwrap();
    let policy = format!(
        "[limits]\nwall_time = \"10s\"\n[identity]\nuid_base = {uid}\n[filesystem]\nro_binds = [\"/usr\", \"/lib\", \"/lib64\", \"/bin\", \"{d}\"]\n"
    );
    let code = format!(
        "kv('read', open({f}).read())\n\
         err('rplus', open, {f}, 'r+b')\n\
         err('create', open, {d} + '/new.txt', 'w')\n\
         err('unlink', os.unlink, {f})\n",
        f = py_str(&format!("{d}/file.txt")),
        d = py_str(d)
    );
    let run = Job::probe(&code).policy(policy).run();
    run.assert_ok();
    run.checks()
        .kv_eq("read", "original")
        .os_errno("rplus", libc::EROFS)
        .os_errno("create", libc::EROFS)
        .os_errno("unlink", libc::EROFS)
        .check(
            std::fs::read_to_string(dir.join("file.txt")).unwrap() == "original",
            "host file unchanged",
        )
        .finish();
}

// --------------------------------------------------------------- symlinks

fn meta_fingerprint(p: &Path) -> (u32, u32, u32, u64, i64, i64) {
    let m = std::fs::symlink_metadata(p).unwrap();
    (m.uid(), m.gid(), m.mode(), m.len(), m.mtime(), m.ctime())
}

#[test]
fn escape_symlinks_planted_links_stay_links() {
    require_root();
    let ws = workspace_dir();
    let shadow_before = meta_fingerprint(Path::new("/etc/shadow"));
    let shadow_bytes = std::fs::read("/etc/shadow").unwrap();
    let root_before = meta_fingerprint(Path::new("/"));
    let etc_before = meta_fingerprint(Path::new("/etc"));
    let run1 = Job::new(
        "import os\n\
         os.symlink('/etc/shadow', '/workspace/output/x')\n\
         os.symlink('/', '/workspace/output/up')\n\
         os.symlink('/etc', '/workspace/etc')\n\
         print('planted')\n",
    )
    .workspace(ws.path())
    .run();
    run1.assert_ok();
    // A second run in the same workspace reads through the links: inside
    // the jail they resolve inside the jail.
    let run2 = Job::probe(
        "err('read_x', open, '/workspace/output/x', 'rb')\n\
         err('read_up_shadow', open, '/workspace/output/up/etc/shadow', 'rb')\n\
         err('list_up_root', os.listdir, '/workspace/output/up/root')\n\
         kv('etc_link_has_shadow', 'shadow' in os.listdir('/workspace/etc'))\n\
         kv('etc_link_passwd_has_root', 'root:' in open('/workspace/etc/passwd').read())\n",
    )
    .workspace(ws.path())
    .run();
    run2.assert_ok();
    let out = ws.path().join("output");
    let x = std::fs::symlink_metadata(out.join("x"));
    let up = std::fs::symlink_metadata(out.join("up"));
    run2.checks()
        .os_errno("read_x", libc::ENOENT)
        .os_errno("read_up_shadow", libc::ENOENT)
        .os_errno("list_up_root", libc::ENOENT)
        // /workspace/etc -> /etc resolves to the jail's own small /etc.
        .kv_eq("etc_link_has_shadow", "False")
        .kv_eq("etc_link_passwd_has_root", "False")
        .check(
            x.as_ref()
                .map(|m| m.file_type().is_symlink())
                .unwrap_or(false)
                && std::fs::read_link(out.join("x")).ok().as_deref()
                    == Some(Path::new("/etc/shadow")),
            format!("host output/x is still a symlink to /etc/shadow ({x:?})"),
        )
        .check(
            up.as_ref()
                .map(|m| m.file_type().is_symlink())
                .unwrap_or(false),
            format!("host output/up is still a symlink ({up:?})"),
        )
        .check(
            meta_fingerprint(Path::new("/etc/shadow")) == shadow_before
                && std::fs::read("/etc/shadow").unwrap() == shadow_bytes,
            "host /etc/shadow untouched (owner, mode, size, mtime, ctime, bytes)",
        )
        .check(
            meta_fingerprint(Path::new("/")) == root_before,
            "host / ownership and mode untouched",
        )
        .check(
            meta_fingerprint(Path::new("/etc")) == etc_before,
            "host /etc ownership and mode untouched",
        )
        .finish();
}

/// The job replaces `output/` itself with a symlink to a host directory; the
/// next `prims run --workspace` creates and chowns `output/` and must not
/// follow the link.
#[test]
fn escape_symlinks_output_dir_swapped_for_link() {
    require_root();
    let ws = workspace_dir();
    let victim = tempfile::Builder::new()
        .prefix("prims-test-victim-")
        .tempdir()
        .unwrap();
    std::fs::write(victim.path().join("keep.txt"), "keep").unwrap();
    std::fs::set_permissions(
        victim.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let victim_before = meta_fingerprint(victim.path());
    let keep_before = meta_fingerprint(&victim.path().join("keep.txt"));
    let v = victim.path().to_str().unwrap();
    let run1 = Job::new(format!(
        "import os, shutil\n\
         shutil.rmtree('/workspace/output')\n\
         os.symlink({v}, '/workspace/output')\n\
         try:\n    os.rmdir('/workspace/mounts')\nexcept OSError as e:\n    print('mounts', e.errno)\n\
         print('swapped')\n",
        v = py_str(v)
    ))
    .workspace(ws.path())
    .run();
    run1.assert_ok();
    // The next run may refuse the workspace (exit 125 with a message) or run
    // with a fresh output/; either way it must not follow the link.
    let run2 = Job::new("open('/workspace/output/new.txt', 'w').write('x')\n")
        .workspace(ws.path())
        .run_raw();
    let refused = run2.code == Some(125) && run2.stderr_str().starts_with("prims: ");
    let ran = serde_json::from_slice::<serde_json::Value>(run2.stdout.trim_ascii()).is_ok();
    let victim_after = meta_fingerprint(victim.path());
    let mut failures = Vec::new();
    if !(refused || ran) {
        failures.push(
            "the second run either refuses with 125 + `prims: ` or prints an outcome".to_string(),
        );
    }
    if run2.stderr_str().contains("panicked at") {
        failures.push("no panic".to_string());
    }
    if victim_after != victim_before {
        failures.push(format!(
            "victim dir untouched: before {victim_before:?}, after {victim_after:?}"
        ));
    }
    if meta_fingerprint(&victim.path().join("keep.txt")) != keep_before {
        failures.push("victim file untouched".to_string());
    }
    if victim.path().join("new.txt").exists() {
        failures.push("nothing was written into the victim dir through the link".to_string());
    }
    assert!(
        failures.is_empty(),
        "failed: {failures:?}\n{}",
        run2.describe()
    );
    eprintln!(
        "note: the second run over a swapped output/ exited {:?}: {}",
        run2.code,
        run2.stderr_str().trim()
    );
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
    run.checks()
        .kv_eq("env", "HOME LANG PATH PYTHONUNBUFFERED TMPDIR VIRTUAL_ENV")
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
