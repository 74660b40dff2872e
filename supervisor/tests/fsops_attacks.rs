//! Symlink and `..` attacks on every file operation: refused (Forbidden,
//! or NotFound/BadRequest where nothing escapes), and host files untouched.

#[path = "sessions_support/mod.rs"]
mod support;

use prims_protocol::wire::{EntryKind, ErrorCode};
use prims_supervisor::fsops::{self, FsError};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::*;

const UID: u32 = 300_777;

/// A workspace with the classic plants in `output/`:
/// x -> /etc/shadow, up -> /, d -> /etc, rel -> ../../secret.txt (the host
/// file next to the workspace), inside -> ../mounts/data.txt (stays in).
fn planted(t: &TestDir) -> PathBuf {
    let ws = plain_workspace(t, UID);
    std::fs::write(ws.join("mounts/data.txt"), "inside data").unwrap();
    let out = ws.join("output");
    symlink("/etc/shadow", out.join("x")).unwrap();
    symlink("/", out.join("up")).unwrap();
    symlink("/etc", out.join("d")).unwrap();
    symlink("../../secret.txt", out.join("rel")).unwrap();
    symlink("../mounts/data.txt", out.join("inside")).unwrap();
    symlink("d", out.join("hop")).unwrap();
    symlink("../output/../mounts/data.txt", out.join("dotdot-inside")).unwrap();
    symlink("loop2", out.join("loop1")).unwrap();
    symlink("loop1", out.join("loop2")).unwrap();
    nix::unistd::mkfifo(
        &out.join("fifo"),
        nix::sys::stat::Mode::from_bits_truncate(0o666),
    )
    .unwrap();
    ws
}

/// Paths an attacker would try, with every plant.
const ATTACKS: &[&str] = &[
    "../x",
    "../secret.txt",
    "/etc/passwd",
    "/etc/shadow",
    "output/../../x",
    "output/../../secret.txt",
    "output/x",
    "output/up",
    "output/up/etc",
    "output/up/etc/shadow",
    "output/d",
    "output/d/shadow",
    "output/rel",
    "output/hop/shadow",
    "output/loop1",
    "mounts/../../secret.txt",
];

fn refused(e: &FsError) -> bool {
    matches!(
        e.code(),
        ErrorCode::Forbidden | ErrorCode::NotFound | ErrorCode::BadRequest
    )
}

fn snapshot_of_host() -> Vec<(PathBuf, Option<std::fs::Metadata>)> {
    ["/etc/passwd", "/etc/shadow", "/etc"]
        .iter()
        .map(|p| (PathBuf::from(p), std::fs::symlink_metadata(p).ok()))
        .collect()
}

fn assert_host_untouched(before: &[(PathBuf, Option<std::fs::Metadata>)], t: &TestDir) {
    for (p, m) in before {
        let now = std::fs::symlink_metadata(p).ok();
        let stamp =
            |m: &Option<std::fs::Metadata>| m.as_ref().map(|m| (m.len(), m.modified().ok()));
        assert_eq!(stamp(m), stamp(&now), "{} changed", p.display());
    }
    assert_eq!(
        std::fs::read_to_string(t.path.join("secret.txt")).unwrap(),
        "TOPSECRET"
    );
}

#[test]
fn read_file_never_leaks_outside_bytes() {
    let t = TestDir::new("prims-fs-read-");
    let ws = planted(&t);
    let host = snapshot_of_host();
    for p in ATTACKS {
        match fsops::read_file(&ws, p, 0, 1 << 20) {
            Ok(d) => panic!(
                "{p}: read {} bytes: {:?}",
                d.data.len(),
                String::from_utf8_lossy(&d.data)
            ),
            Err(e) => {
                assert!(refused(&e), "{p}: {e}");
                println!("read_file {p:?} -> {:?}: {e}", e.code());
            }
        }
    }
    for p in [
        "output/x",
        "output/d/shadow",
        "output/up/etc/shadow",
        "output/rel",
        "/etc/passwd",
        "../x",
    ] {
        assert_eq!(
            fsops::read_file(&ws, p, 0, 10).unwrap_err().code(),
            ErrorCode::Forbidden,
            "{p}"
        );
    }
    // A link that stays inside the workspace is followed.
    for p in ["output/inside", "output/dotdot-inside"] {
        let d = fsops::read_file(&ws, p, 0, 100).unwrap();
        assert_eq!(d.data, b"inside data", "{p}");
    }
    // A planted FIFO neither hangs nor reads.
    let start = Instant::now();
    let e = fsops::read_file(&ws, "output/fifo", 0, 10).unwrap_err();
    assert!(matches!(e, FsError::NotAFile(_)), "{e}");
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_host_untouched(&host, &t);
}

#[test]
fn list_dir_never_lists_outside() {
    let t = TestDir::new("prims-fs-list-");
    let ws = planted(&t);
    for p in ATTACKS {
        let e = fsops::list_dir(&ws, p).unwrap_err();
        assert!(refused(&e), "{p}: {e}");
        println!("list_dir {p:?} -> {:?}: {e}", e.code());
    }
    for p in ["output/up", "output/d", "/etc", "../"] {
        assert_eq!(
            fsops::list_dir(&ws, p).unwrap_err().code(),
            ErrorCode::Forbidden,
            "{p}"
        );
    }
    // The plants themselves are shown as symlinks, not followed.
    let entries = fsops::list_dir(&ws, "output").unwrap();
    for name in ["x", "up", "d", "rel", "inside"] {
        let e = entries.iter().find(|e| e.name == name).unwrap();
        assert_eq!(e.kind, EntryKind::Symlink, "{name}");
        assert_eq!(e.path, format!("output/{name}"));
    }
    let fifo = entries.iter().find(|e| e.name == "fifo").unwrap();
    assert_eq!(fifo.kind, EntryKind::Other);
}

#[test]
fn write_mount_never_writes_outside() {
    let t = TestDir::new("prims-fs-write-");
    let ws = planted(&t);
    let host = snapshot_of_host();
    let outside = t.path.join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("victim"), "original").unwrap();
    // Plants under mounts/: a directory link out, and a file link out.
    symlink(&outside, ws.join("mounts/sub")).unwrap();
    symlink(outside.join("victim"), ws.join("mounts/victim")).unwrap();
    let write = |ws: &Path, p: &str| fsops::write_mount(ws, p, 4, vec![b"evil".to_vec()], UID);
    for p in [
        "../x",
        "../../secret.txt",
        "/etc/passwd",
        "a/../../x",
        "..",
        "sub/x",
        "sub/victim",
        "",
    ] {
        let e = write(&ws, p).unwrap_err();
        assert!(refused(&e), "{p}: {e}");
        println!("write_mount {p:?} -> {:?}: {e}", e.code());
    }
    assert_eq!(
        write(&ws, "sub/x").unwrap_err().code(),
        ErrorCode::Forbidden
    );
    // Writing over a planted link replaces the link, never its target.
    write(&ws, "victim").unwrap();
    assert_eq!(
        std::fs::read_to_string(outside.join("victim")).unwrap(),
        "original"
    );
    let m = std::fs::symlink_metadata(ws.join("mounts/victim")).unwrap();
    assert!(m.file_type().is_file());
    assert!(std::fs::read_dir(&outside).unwrap().count() == 1);

    // The whole mounts/ directory swapped for a link out.
    let ws2 = t.path.join("ws2");
    std::fs::create_dir_all(ws2.join("output")).unwrap();
    symlink(&outside, ws2.join("mounts")).unwrap();
    let e = write(&ws2, "new.txt").unwrap_err();
    assert_eq!(e.code(), ErrorCode::Forbidden, "{e}");
    assert!(!outside.join("new.txt").exists());
    let e = fsops::list_dir(&ws2, "mounts").unwrap_err();
    assert_eq!(e.code(), ErrorCode::Forbidden, "{e}");
    let e = fsops::read_file(&ws2, "mounts/victim", 0, 100).unwrap_err();
    assert_eq!(e.code(), ErrorCode::Forbidden, "{e}");
    assert_host_untouched(&host, &t);
}

#[test]
fn snapshot_and_disk_used_never_walk_outside() {
    let t = TestDir::new("prims-fs-snap-");
    let ws = planted(&t);
    std::fs::write(ws.join("output/real.txt"), "r").unwrap();
    let snap = fsops::snapshot_output(&ws).unwrap();
    assert_eq!(
        snap.paths().collect::<Vec<_>>(),
        ["real.txt"],
        "links and FIFOs skipped"
    );
    assert!(!snap.truncated);
    // output/up -> / is not walked: the whole host would be far bigger.
    assert!(fsops::disk_used(&ws) < 1 << 20);

    // output/ itself swapped for a link to /etc.
    let ws2 = t.path.join("ws2");
    std::fs::create_dir(&ws2).unwrap();
    symlink("/etc", ws2.join("output")).unwrap();
    assert!(fsops::snapshot_output(&ws2).unwrap().is_empty());
    assert!(fsops::list_dir(&ws2, "output").is_err());
}
