//! The disk quota is real: writes past it fail with ENOSPC, for the
//! session's uid and for uploads alike, and leave nothing half-written.

mod sessions_support;

use prims_protocol::wire::ErrorCode;
use prims_supervisor::fsops::{self, FsError};
use prims_supervisor::sessions::{QuotaMode, SessionStore};
use sessions_support::*;
use std::time::Instant;

#[test]
fn writing_past_the_quota_as_the_session_uid_gets_enospc() {
    let t = TestDir::new("prims-sess-quota-");
    let store = SessionStore::open(&t.path, &policy(QuotaMode::Loop)).unwrap();
    let id = store.create(None).unwrap().session_id;
    let s = store.get(&id, None).unwrap();
    let out = s.workspace.join("output");
    let dd = run_as(
        s.host_uid,
        &out,
        &[
            "dd",
            "if=/dev/zero",
            "of=big",
            "bs=1M",
            "count=32",
            "status=none",
        ],
    );
    let stderr = String::from_utf8_lossy(&dd.stderr);
    assert!(!dd.status.success(), "32 MiB fit in a 16 MiB quota?");
    assert!(stderr.contains("No space left on device"), "{stderr}");
    let info = store.info(&id, None).unwrap();
    assert!(info.disk_used_bytes > 12 * MIB, "{}", info.disk_used_bytes);
    assert!(info.disk_used_bytes <= info.disk_quota_bytes);
    // The host's filesystem did not take the overflow.
    let big = std::fs::metadata(out.join("big")).unwrap().len();
    assert!(big <= 16 * MIB, "{big}");

    // An upload into the full workspace fails cleanly, announced or not.
    let e = fsops::write_mount(
        &s.workspace,
        "x.bin",
        8 * MIB,
        vec![vec![1u8; 8 << 20]],
        s.host_uid,
    )
    .unwrap_err();
    assert_eq!(e.code(), ErrorCode::Quota, "{e}");
    // Without a size to check first, the full disk is found while writing.
    let chunks = (0..16).map(|_| vec![1u8; 1 << 20]);
    let e = fsops::write_mount_up_to(&s.workspace, "z.bin", 1 << 30, chunks, s.host_uid, || true)
        .unwrap_err();
    assert!(matches!(e, FsError::NoSpace(_)), "{e}");
    let left: Vec<_> = std::fs::read_dir(s.workspace.join("mounts"))
        .unwrap()
        .collect();
    assert!(left.is_empty(), "{left:?}");
    std::fs::remove_file(out.join("big")).unwrap();

    // An upload that fits when it starts, but the code fills the disk
    // meanwhile: ENOSPC mid-write, reported as Quota, nothing left behind.
    let st = nix::sys::statvfs::statvfs(&s.workspace).unwrap();
    let free = st.blocks_available() * st.fragment_size();
    let filler = out.join("filler");
    let mut first = true;
    let chunks = std::iter::from_fn(|| {
        if first {
            first = false;
            std::fs::write(&filler, vec![0u8; (free - 2 * MIB) as usize]).unwrap();
        }
        Some(vec![9u8; 64 << 10])
    })
    .take(64);
    let e = fsops::write_mount(&s.workspace, "y.bin", 4 * MIB, chunks, s.host_uid).unwrap_err();
    assert!(matches!(e, FsError::NoSpace(_)), "{e}");
    assert_eq!(e.code(), ErrorCode::Quota);
    let left: Vec<_> = std::fs::read_dir(s.workspace.join("mounts"))
        .unwrap()
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // Space frees up again.
    std::fs::remove_file(&filler).unwrap();
    let n = fsops::write_mount(
        &s.workspace,
        "ok.bin",
        1024,
        vec![vec![0u8; 1024]],
        s.host_uid,
    )
    .unwrap();
    assert_eq!(n, 1024);
}

/// Not a pass/fail test: prints what creating and closing a session costs.
/// `cargo test -p prims-supervisor --test sessions_quota -- --ignored --nocapture`
#[test]
#[ignore]
fn measure_create_and_close() {
    let t = TestDir::new("prims-sess-cost-");
    for (mode, quota) in [
        (QuotaMode::Loop, 1 << 30),
        (QuotaMode::Loop, 16 * MIB),
        (QuotaMode::None, 0),
    ] {
        let mut p = policy(mode);
        p.disk_quota = quota;
        p.max_sessions = 64;
        p.uid_count = 100;
        let store = SessionStore::open(&t.path, &p).unwrap();
        let n = 20;
        let start = Instant::now();
        let ids: Vec<String> = (0..n)
            .map(|_| store.create(None).unwrap().session_id)
            .collect();
        let create = start.elapsed() / n;
        let start = Instant::now();
        for id in &ids {
            store.close(id, None).unwrap();
        }
        let close = start.elapsed() / n;
        println!("{mode:?} quota={quota}: create {create:?}, close {close:?} per session");
    }
}
