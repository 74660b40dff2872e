//! The front-end's TCP connections, seen from the server's side of the
//! socket: one kept-alive connection carries a session's calls one after
//! another, and every accepted socket has TCP_NODELAY. A call's answer is a
//! stream of small writes (headers, events, the last chunk); under Nagle's
//! algorithm each waits for the ACK of the one before, and a kept-alive
//! client delays its ACKs by up to 40 ms: every call would pay that.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use support::Stack;

/// A duplicate of file descriptor `fd` of process `pid` (root may take it).
fn take_fd(pid: u32, fd: i32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags; the result is checked.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if pidfd < 0 {
        return None;
    }
    // SAFETY: pidfd_open returned a new descriptor that we alone own.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as i32) };
    // SAFETY: pidfd is a valid pidfd; the result is checked.
    let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    // SAFETY: pidfd_getfd returned a new descriptor that we alone own.
    (got >= 0).then(|| unsafe { OwnedFd::from_raw_fd(got as i32) })
}

fn peer(fd: &OwnedFd) -> Option<SocketAddr> {
    // SAFETY: zeroed sockaddr_storage is a valid out-parameter.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: ss and len describe a buffer of len bytes.
    let rc = unsafe { libc::getpeername(fd.as_raw_fd(), (&raw mut ss).cast(), &mut len) };
    if rc != 0 || i32::from(ss.ss_family) != libc::AF_INET {
        return None;
    }
    // SAFETY: the family is AF_INET, so the storage holds a sockaddr_in.
    let sin: libc::sockaddr_in = unsafe { std::ptr::read((&raw const ss).cast()) };
    let ip = std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
    Some(SocketAddr::from((ip, u16::from_be(sin.sin_port))))
}

fn tcp_nodelay(fd: &OwnedFd) -> i32 {
    let mut v: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: v and len describe an int-sized buffer.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&raw mut v).cast(),
            &mut len,
        )
    };
    assert_eq!(rc, 0, "getsockopt: {}", std::io::Error::last_os_error());
    v
}

/// The front-end's end of the connection whose client end is `client`.
fn server_end(pid: u32, client: SocketAddr) -> OwnedFd {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).expect("the front-end's fds");
    fds.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|fd| take_fd(pid, fd))
        .find(|fd| peer(fd) == Some(client))
        .unwrap_or_else(|| panic!("no socket of the front-end has peer {client}"))
}

struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        let h = self
            .headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name));
        h.map(|(_, v)| v.as_str())
    }
}

/// One POST on `conn`, and its whole response: Content-Length or chunked to
/// the last chunk, so that the connection is free for the next request.
fn post(conn: &mut BufReader<TcpStream>, body: &str, headers: &[(&str, &str)]) -> Response {
    let mut req = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    conn.get_mut().write_all(req.as_bytes()).expect("send");
    let mut line = String::new();
    conn.read_line(&mut line).expect("status line");
    let status = line.split(' ').nth(1).and_then(|s| s.parse().ok());
    let status = status.unwrap_or_else(|| panic!("status line {line:?}"));
    let mut headers = Vec::new();
    loop {
        line.clear();
        conn.read_line(&mut line).expect("header");
        let Some((k, v)) = line.trim_end().split_once(':') else {
            break;
        };
        headers.push((k.trim().to_owned(), v.trim().to_owned()));
    }
    let mut r = Response {
        status,
        headers,
        body: String::new(),
    };
    if let Some(n) = r.header("content-length") {
        let mut b = vec![0; n.parse().expect("length")];
        conn.read_exact(&mut b).expect("body");
        r.body = String::from_utf8_lossy(&b).into_owned();
    } else if r.header("transfer-encoding") == Some("chunked") {
        loop {
            line.clear();
            conn.read_line(&mut line).expect("chunk size");
            let n = usize::from_str_radix(line.trim(), 16).expect("chunk size");
            let mut b = vec![0; n + 2];
            conn.read_exact(&mut b).expect("chunk");
            if n == 0 {
                break;
            }
            r.body.push_str(&String::from_utf8_lossy(&b[..n]));
        }
    }
    r
}

#[test]
fn one_connection_carries_a_session_and_has_tcp_nodelay() {
    let stack = Stack::start("", None);
    let stream = TcpStream::connect(("127.0.0.1", stack.port)).expect("connect");
    let client = stream.local_addr().expect("local addr");
    let mut conn = BufReader::new(stream);
    let init = post(
        &mut conn,
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        &[],
    );
    assert_eq!(init.status, 200, "{}", init.body);
    let sid = init
        .header("mcp-session-id")
        .expect("Mcp-Session-Id")
        .to_owned();
    let session = [
        ("Mcp-Session-Id", sid.as_str()),
        ("Mcp-Protocol-Version", "2025-06-18"),
    ];
    let note = post(
        &mut conn,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        &session,
    );
    assert_eq!(note.status, 202);
    for i in 0..3 {
        let call = post(
            &mut conn,
            &format!(
                r#"{{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{{"name":"run_code","arguments":{{"code":"print({i})"}}}}}}"#,
                i + 2
            ),
            &session,
        );
        assert_eq!(call.status, 200, "{}", call.body);
        assert!(
            call.body.contains(&format!(r#""stdout":"{i}\n""#)),
            "call {i} answered {}",
            call.body
        );
    }
    let server = server_end(stack.frontend_pid(), client);
    assert_eq!(
        tcp_nodelay(&server),
        1,
        "TCP_NODELAY on the accepted socket"
    );
}
