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

/// Every mode has the jail's own loopback: IPv4 and IPv6 sockets, as TCP
/// and UDP only. Raw, ICMP, SCTP and other types and protocols, and the
/// packet, vsock, crypto and netlink families, stay refused by seccomp.
#[test]
fn escape_sockets_ip_is_tcp_and_udp_only() {
    for mode in ["none", "loopback"] {
        let run = Job::probe(probes::SOCKETS)
            .policy(policy_with(
                "10s",
                &format!("[network]\nmode = \"{mode}\"\n"),
            ))
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
            .sc_ok("inet_tcp_flags")
            .sc_ok("inet_udp")
            .sc_ok("inet6_udp_flags")
            .sc_errno("inet_raw", EPERM)
            .sc_errno("inet6_raw", EPERM)
            .sc_errno("inet_icmp_dgram", EPERM)
            .sc_errno("inet6_icmp_dgram", EPERM)
            .sc_errno("inet_sctp", EPERM)
            .sc_errno("inet_seqpacket", EPERM)
            .sc_errno("inet_packet_type", EPERM)
            .sc_errno("inet_unknown_flag", EPERM)
            .finish();
    }
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
    for (mode, up) in [("none", "1"), ("loopback", "1")] {
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
                    "mode {mode}: lo up flag {:?} (expected {up}: every mode has the jail's own loopback)",
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

/// From the jail's own loopback, which every mode has: nothing of the
/// host's is reachable, neither its loopback services (TCP over IPv4 and
/// IPv6, UDP) nor its addresses, the metadata service or the internet,
/// while the jail's own TCP and UDP servers work, over IPv4 and IPv6.
#[test]
fn escape_loopback_reaches_nothing_outside() {
    require_root();
    let lo_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind host lo");
    let lo_port = lo_listener.local_addr().unwrap().port();
    let lo6_listener = std::net::TcpListener::bind("[::1]:0").expect("bind host ::1");
    let lo6_port = lo6_listener.local_addr().unwrap().port();
    let any_listener = std::net::TcpListener::bind("0.0.0.0:0").expect("bind host any");
    let any_port = any_listener.local_addr().unwrap().port();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind host udp");
    let udp_port = udp.local_addr().unwrap().port();
    let host_ip = host_ipv4().expect("the host has a non-loopback IPv4 address");
    // Pair: from the host every listener is reachable.
    for addr in [
        format!("127.0.0.1:{lo_port}"),
        format!("[::1]:{lo6_port}"),
        format!("{host_ip}:{any_port}"),
    ] {
        std::net::TcpStream::connect(&addr)
            .unwrap_or_else(|e| panic!("pairing: host cannot connect to {addr}: {e}"));
    }
    for l in [&lo_listener, &lo6_listener, &any_listener] {
        let _ = l.accept().expect("accept host pairing connection");
        l.set_nonblocking(true).unwrap();
    }
    std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .send_to(b"pair", ("127.0.0.1", udp_port))
        .unwrap();
    let mut buf = [0u8; 16];
    udp.set_read_timeout(Some(std::time::Duration::from_secs(2)))
        .unwrap();
    assert_eq!(udp.recv(&mut buf).expect("pairing: host udp"), 4);

    let code = format!(
        r#"
import socket
def conn(family, addr):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect(addr)
    finally:
        s.close()
def serve_tcp(family, host):
    l = socket.socket(family, socket.SOCK_STREAM)
    l.bind((host, 0))
    l.listen()
    c = socket.create_connection(l.getsockname()[:2], timeout=3)
    a, _ = l.accept()
    c.sendall(b'ping')
    assert a.recv(4) == b'ping'
def serve_udp(family, host):
    r = socket.socket(family, socket.SOCK_DGRAM)
    r.bind((host, 0))
    r.settimeout(3)
    socket.socket(family, socket.SOCK_DGRAM).sendto(b'ping', r.getsockname()[:2])
    assert r.recv(4) == b'ping'
err('host_lo_port', conn, socket.AF_INET, ('127.0.0.1', {lo_port}))
err('host_lo6_port', conn, socket.AF_INET6, ('::1', {lo6_port}))
err('host_ip_port', conn, socket.AF_INET, ('{host_ip}', {any_port}))
err('metadata', conn, socket.AF_INET, ('169.254.169.254', 80))
err('public_ip', conn, socket.AF_INET, ('1.1.1.1', 80))
err('public_ip6', conn, socket.AF_INET6, ('2606:4700:4700::1111', 80))
_u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
err('udp_to_host_lo', _u.sendto, b'escaped', ('127.0.0.1', {udp_port}))
err('udp_to_metadata', _u.sendto, b'escaped', ('169.254.169.254', 53))
err('own_tcp4', serve_tcp, socket.AF_INET, '127.0.0.1')
err('own_tcp6', serve_tcp, socket.AF_INET6, '::1')
err('own_udp4', serve_udp, socket.AF_INET, '127.0.0.1')
err('own_udp6', serve_udp, socket.AF_INET6, '::1')
"#
    );
    let run = Job::probe(&code).policy(policy_with("20s", "")).run();
    run.assert_ok();
    let accepted: Vec<String> = [&lo_listener, &lo6_listener, &any_listener]
        .iter()
        .filter_map(|l| l.accept().ok().map(|(_, a)| a.to_string()))
        .collect();
    udp.set_nonblocking(true).unwrap();
    let datagram = udp.recv(&mut buf);
    run.checks()
        // The jail's own loopback answers, with nothing listening there.
        .os_errno("host_lo_port", libc::ECONNREFUSED)
        .os_errno("host_lo6_port", libc::ECONNREFUSED)
        .os_errno("host_ip_port", libc::ENETUNREACH)
        .os_errno("metadata", libc::ENETUNREACH)
        .os_errno("public_ip", libc::ENETUNREACH)
        .os_errno("public_ip6", libc::ENETUNREACH)
        // Sent on the jail's own lo, where nobody listens.
        .os_ok("udp_to_host_lo")
        .os_errno("udp_to_metadata", libc::ENETUNREACH)
        // Control: the jail's own servers work, so the refusals above are
        // isolation, not a broken stack.
        .os_ok("own_tcp4")
        .os_ok("own_tcp6")
        .os_ok("own_udp4")
        .os_ok("own_udp6")
        .check(
            accepted.is_empty(),
            format!("a host listener received a connection from the jail: {accepted:?}"),
        )
        .check(
            datagram.is_err(),
            format!("the host's UDP socket received a datagram from the jail: {datagram:?}"),
        )
        .finish();
}

/// Two jails at once: one listens on a port of its loopback, the other
/// connects to that port on its own and finds nobody. Each session's
/// loopback is its own network namespace's.
#[test]
fn escape_loopback_another_sessions_listener_unreachable() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("listener");
    std::fs::create_dir(&ws).unwrap();
    // The jail's user writes its marker there.
    std::fs::set_permissions(&ws, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let port = 20_000 + (std::process::id() % 20_000) as u16;
    // Listens for 8 s, says so in its workspace, then counts what came.
    let listener = format!(
        r#"
import socket, time
l = socket.socket()
l.bind(('127.0.0.1', {port}))
l.listen()
l.settimeout(0.1)
l6 = socket.socket(socket.AF_INET6)
l6.bind(('::1', {port}))
l6.listen()
l6.settimeout(0.1)
open('/workspace/listening', 'w').write('yes')
came = 0
end = time.monotonic() + 8
while time.monotonic() < end:
    for s in (l, l6):
        try:
            s.accept()
            came += 1
        except socket.timeout:
            pass
kv('came', came)
"#
    );
    let listening = ws.join("listening");
    let job_a = Job::probe(&listener)
        .policy(policy_with("20s", ""))
        .workspace(&ws);
    let a = std::thread::spawn(move || job_a.run());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !listening.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the listening jail did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let code = format!(
        r#"
import socket
def conn(family, host):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect((host, {port}))
    finally:
        s.close()
err('other_tcp4', conn, socket.AF_INET, '127.0.0.1')
err('other_tcp6', conn, socket.AF_INET6, '::1')
"#
    );
    let b = Job::probe(&code).policy(policy_with("10s", "")).run();
    let a = a.join().expect("the listening jail's thread");
    a.assert_ok();
    b.assert_ok();
    b.checks()
        .os_errno("other_tcp4", libc::ECONNREFUSED)
        .os_errno("other_tcp6", libc::ECONNREFUSED)
        .finish();
    a.checks().kv_eq("came", "0").finish();
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
    let run = Job::probe(&code).policy(policy_with("15s", "")).run();
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
