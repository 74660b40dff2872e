//! `SO_PEERCRED`: a uid that is not allowed is dropped before the handshake,
//! root always gets in, and a listed uid gets in; `nobody` never does, and
//! neither does a peer whose gid is the only thing right about it. One uid
//! cannot take every connection slot. Needs root.

mod socket_support;

use prims_protocol::frame;
use prims_protocol::wire::{Hello, PROTOCOL_VERSION};
use socket_support::*;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const NOBODY: u32 = 65534;
/// The front-end's uid and group in these tests: no account has them.
const FRONT: u32 = 4243;
/// Another uid with no account.
const STRANGER: u32 = 4242;

#[derive(Debug, PartialEq)]
enum Seen {
    /// The server closed the connection without a word.
    Refused,
    Welcomed,
    Other(i32),
}

/// Fork a child that becomes `uid` and group `gid`, connects to `socket`,
/// says hello and reports what came back.
fn connect_as(uid: u32, gid: u32, socket: &Path) -> Seen {
    let hello = frame::encode(&Hello {
        protocol: PROTOCOL_VERSION,
        client: "nobody".into(),
    })
    .unwrap();
    // SAFETY: sockaddr_un is plain data; all-zero is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let raw = socket.as_os_str().as_bytes();
    assert!(raw.len() < addr.sun_path.len());
    for (d, s) in addr.sun_path.iter_mut().zip(raw) {
        *d = *s as libc::c_char;
    }
    // Everything the child needs is built above: after fork() in a
    // threaded process it makes only raw syscalls, then _exit.
    // SAFETY: see above; the parent only waits for the child.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: async-signal-safe calls on memory owned by this frame.
        unsafe {
            libc::alarm(10);
            let ok = libc::setgroups(0, std::ptr::null()) == 0
                && libc::setgid(gid) == 0
                && libc::setuid(uid) == 0
                && libc::getuid() == uid;
            if !ok {
                libc::_exit(10);
            }
            let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
            let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
            if libc::connect(fd, &addr as *const _ as *const libc::sockaddr, len) != 0 {
                libc::_exit(11);
            }
            libc::write(fd, hello.as_ptr().cast(), hello.len());
            let mut buf = [0u8; 15];
            let mut got = 0;
            while got < buf.len() {
                let n = libc::read(fd, buf.as_mut_ptr().add(got).cast(), buf.len() - got);
                if n <= 0 {
                    break;
                }
                got += n as usize;
            }
            let code = match got {
                0 => 0,
                15 if &buf[4..] == b"{\"protocol\"" => 1,
                _ => 12,
            };
            libc::_exit(code);
        }
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(waited, pid);
    assert!(libc::WIFEXITED(status), "child died: {status}");
    match libc::WEXITSTATUS(status) {
        0 => Seen::Refused,
        1 => Seen::Welcomed,
        other => Seen::Other(other),
    }
}

/// Off the runtime thread, which must keep serving meanwhile. The child's
/// group owns the socket file, so that the file's mode lets every child
/// connect and only the server's peer check decides.
async fn connect(uid: u32, gid: u32, server: &TestServer) -> Seen {
    // The child must be able to reach the socket for the kernel to tell us who it is.
    std::fs::set_permissions(server.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = server.path.clone();
    tokio::task::spawn_blocking(move || connect_as(uid, gid, &path))
        .await
        .unwrap()
}

fn require_root() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root");
}

#[tokio::test]
async fn a_uid_that_is_not_allowed_is_refused_and_root_is_not() {
    require_root();
    let server = start_with(|c| {
        c.socket_group = Some(FRONT);
        c.allowed_uids = vec![FRONT];
    })
    .await;
    assert_eq!(connect(STRANGER, FRONT, &server).await, Seen::Refused);
    assert_eq!(connect(NOBODY, FRONT, &server).await, Seen::Refused);
    server.assert_alive().await;
    assert_eq!(connect(0, 0, &server).await, Seen::Welcomed);
    assert_eq!(connect(FRONT, FRONT, &server).await, Seen::Welcomed);
}

#[tokio::test]
async fn nobody_is_refused_even_when_listed() {
    require_root();
    let server = start_with(|c| {
        c.socket_group = Some(NOBODY);
        c.allowed_uids = vec![NOBODY, FRONT];
    })
    .await;
    assert_eq!(connect(NOBODY, NOBODY, &server).await, Seen::Refused);
    assert_eq!(connect(FRONT, NOBODY, &server).await, Seen::Welcomed);
}

#[tokio::test]
async fn the_right_gid_on_the_wrong_uid_is_refused() {
    require_root();
    // The socket's group is what lets these peers reach the file at all: the
    // front-end's group (a gid equal to an allowed uid), then root's.
    for gid in [FRONT, 0] {
        let server = start_with(|c| {
            c.socket_group = Some(gid);
            c.allowed_uids = vec![FRONT, NOBODY];
        })
        .await;
        assert_eq!(connect(STRANGER, gid, &server).await, Seen::Refused);
        assert_eq!(connect(NOBODY, gid, &server).await, Seen::Refused);
        assert_eq!(connect(FRONT, gid, &server).await, Seen::Welcomed);
        server.assert_alive().await;
    }
}

#[tokio::test]
async fn one_uid_cannot_take_every_slot() {
    require_root();
    let server = start_with(|c| {
        c.socket_group = Some(FRONT);
        c.allowed_uids = vec![FRONT];
        c.limits.max_connections_per_uid = 2;
    })
    .await;
    let first = server.client().await;
    let _second = server.client().await;
    let third = prims_protocol::client::Client::connect(&server.path, "third").await;
    assert!(
        third.is_err(),
        "root got a third connection past its cap of 2"
    );
    // Another allowed uid still gets in and is served.
    assert_eq!(connect(FRONT, FRONT, &server).await, Seen::Welcomed);
    // A closed connection gives its slot back to its uid.
    drop(first);
    let mut again = None;
    for _ in 0..100 {
        if let Ok(c) = prims_protocol::client::Client::connect(&server.path, "again").await {
            again = Some(c);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let again = again.expect("root's freed slot was not given back");
    assert!(matches!(
        again
            .request(prims_protocol::wire::RequestBody::Stats)
            .await,
        Ok(prims_protocol::wire::Reply::Stats(_))
    ));
}
