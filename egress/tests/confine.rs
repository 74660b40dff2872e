//! The proxy process's confinement, for real: this test binary runs itself
//! again as a child that leaves root for an account (as the proxy does, see
//! `identity`, which the supervisor's tests cover), confines itself and
//! then tries what a hijacked proxy would: write or create a file, run a
//! program, bind a port, signal another process, regain root.

use std::process::Command;

const CHILD: &str = "PRIMS_EGRESS_CONFINE_CHILD";
/// The uid and gid the child runs as, for the proxy's account.
const ACCOUNT: u32 = 4242;

fn errno_of<T>(r: std::io::Result<T>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(e) => e
            .raw_os_error()
            .map_or_else(|| e.to_string(), |n| n.to_string()),
    }
}

/// The child's side: confine, then report each attempt as `name result`.
#[test]
fn confined_child() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    assert!(
        matches!(
            prims_egress::confine::confine(),
            Err(prims_egress::confine::ConfineError::Root)
        ),
        "confine refuses to run as root"
    );
    // SAFETY: plain syscalls on integers.
    unsafe {
        assert_eq!(libc::setgroups(0, std::ptr::null()), 0);
        assert_eq!(libc::setresgid(ACCOUNT, ACCOUNT, ACCOUNT), 0);
        assert_eq!(libc::setresuid(ACCOUNT, ACCOUNT, ACCOUNT), 0);
    }
    let landlock = prims_egress::confine::confine().expect("confine");
    println!("PROBE landlock {landlock:?}");
    // SAFETY: plain getters.
    println!("PROBE ids {} {}", unsafe { libc::getuid() }, unsafe {
        libc::getgid()
    });
    let path = format!("/tmp/prims-confine-{}", std::process::id());
    println!("PROBE create {}", errno_of(std::fs::File::create(&path)));
    println!(
        "PROBE write_existing {}",
        errno_of(std::fs::OpenOptions::new().append(true).open("/dev/null"))
    );
    println!("PROBE read {}", errno_of(std::fs::read("/etc/hostname")));
    println!(
        "PROBE exec {}",
        errno_of(Command::new("/bin/true").status())
    );
    println!(
        "PROBE bind {}",
        errno_of(std::net::TcpListener::bind("127.0.0.1:0"))
    );
    // SAFETY: signal 0 only checks permission.
    let kill = unsafe { libc::kill(1, 0) };
    println!(
        "PROBE signal {}",
        if kill == 0 {
            "ok".into()
        } else {
            std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(0)
                .to_string()
        }
    );
    // SAFETY: a plain syscall that touches no memory; it must fail.
    let setuid0 = unsafe { libc::setuid(0) };
    println!(
        "PROBE setuid0 {}",
        if setuid0 == 0 {
            "ok".into()
        } else {
            std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(0)
                .to_string()
        }
    );
}

#[test]
fn a_confined_proxy_reads_and_does_nothing_else() {
    // SAFETY: a plain getter.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(euid, 0, "this test needs root: the proxy starts as root");
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "confined_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let got = |k: &str| {
        text.lines()
            .find_map(|l| l.split_once(&format!("PROBE {k} ")).map(|(_, v)| v))
            .unwrap_or_else(|| {
                panic!(
                    "no {k} line in:\n{text}\n{}",
                    String::from_utf8_lossy(&out.stderr)
                )
            })
            .to_string()
    };
    let eacces = libc::EACCES.to_string();
    assert_eq!(got("landlock"), "Fully", "this kernel has Landlock ABI 7");
    assert_eq!(got("ids"), "4242 4242");
    assert_eq!(got("create"), eacces);
    assert_eq!(got("write_existing"), eacces);
    assert_eq!(got("read"), "ok");
    assert_eq!(got("exec"), eacces);
    assert_eq!(got("bind"), eacces);
    assert_eq!(got("signal"), libc::EPERM.to_string());
    assert_eq!(got("setuid0"), libc::EPERM.to_string());
}
