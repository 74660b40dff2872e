//! The network rows of the escape catalogue of shared/notes/jail-hardening.md:
//! socket families, egress (interfaces, host listeners, DNS) and the
//! supervisor's sockets. Every row must fail inside the jail. Each test is
//! named for its escape class.
//!
//! Socket probes use the try-syscall technique described in
//! `escape_syscalls.rs`; its `control_host_probes_are_never_eperm` runs the
//! same socket probes on the host, where none answers EPERM.

use prims_tests::*;

const EPERM: i32 = libc::EPERM;

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
