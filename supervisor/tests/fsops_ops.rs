//! The file operations doing their job: listing, reading, uploads,
//! output snapshots.

#[path = "sessions_support/mod.rs"]
mod support;

use prims_protocol::wire::{EntryKind, ErrorCode, MAX_CHUNK_BYTES};
use prims_supervisor::fsops::{self, FsError, MAX_DIR_ENTRIES};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use support::*;

const UID: u32 = 300_555;

#[test]
fn list_dir_reports_sorted_entries() {
    let t = TestDir::new("prims-fs-ls-");
    let ws = plain_workspace(&t, UID);
    fs::write(ws.join("output/b.txt"), "hello").unwrap();
    fs::create_dir(ws.join("output/a-dir")).unwrap();
    std::os::unix::fs::symlink("b.txt", ws.join("output/c-link")).unwrap();
    for root in ["", ".", "./"] {
        let names: Vec<_> = fsops::list_dir(&ws, root)
            .unwrap()
            .into_iter()
            .map(|e| e.path)
            .collect();
        assert_eq!(names, ["mounts", "output"], "{root:?}");
    }
    let e = fsops::list_dir(&ws, "output/").unwrap();
    let got: Vec<_> = e
        .iter()
        .map(|e| (e.name.as_str(), e.path.as_str(), e.kind))
        .collect();
    assert_eq!(
        got,
        [
            ("a-dir", "output/a-dir", EntryKind::Directory),
            ("b.txt", "output/b.txt", EntryKind::File),
            ("c-link", "output/c-link", EntryKind::Symlink),
        ]
    );
    assert_eq!(e[1].size, 5);
    assert!(e[1].modified > 1_600_000_000);
    assert!(matches!(
        fsops::list_dir(&ws, "output/b.txt"),
        Err(FsError::NotADirectory(_))
    ));
    assert_eq!(
        fsops::list_dir(&ws, "nope").unwrap_err().code(),
        ErrorCode::NotFound
    );
    assert_eq!(
        fsops::list_dir(&ws, "a//b").unwrap_err().code(),
        ErrorCode::BadRequest
    );
    assert_eq!(
        fsops::list_dir(&ws, "a\0b").unwrap_err().code(),
        ErrorCode::BadRequest
    );
    let long = "a/".repeat(2049);
    assert_eq!(
        fsops::list_dir(&ws, &long).unwrap_err().code(),
        ErrorCode::BadRequest
    );
}

#[test]
fn list_dir_is_capped() {
    let t = TestDir::new("prims-fs-cap-");
    let ws = plain_workspace(&t, UID);
    let dir = ws.join("output/many");
    fs::create_dir(&dir).unwrap();
    for i in 0..MAX_DIR_ENTRIES {
        fs::File::create(dir.join(i.to_string())).unwrap();
    }
    assert_eq!(
        fsops::list_dir(&ws, "output/many").unwrap().len(),
        MAX_DIR_ENTRIES
    );
    fs::File::create(dir.join("one-more")).unwrap();
    let e = fsops::list_dir(&ws, "output/many").unwrap_err();
    assert!(matches!(e, FsError::TooMany { .. }), "{e}");
}

#[test]
fn read_file_reads_chunks() {
    let t = TestDir::new("prims-fs-rd-");
    let ws = plain_workspace(&t, UID);
    fs::write(ws.join("output/x.txt"), "0123456789").unwrap();
    let d = fsops::read_file(&ws, "output/x.txt", 0, 4).unwrap();
    assert_eq!(
        (d.data.as_slice(), d.size, d.eof),
        (&b"0123"[..], 10, false)
    );
    let d = fsops::read_file(&ws, "./output/x.txt", 6, 100).unwrap();
    assert_eq!((d.data.as_slice(), d.eof), (&b"6789"[..], true));
    let d = fsops::read_file(&ws, "output/x.txt", 50, 100).unwrap();
    assert_eq!((d.data.len(), d.size, d.eof), (0, 10, true));
    let big = vec![5u8; MAX_CHUNK_BYTES + 10];
    fs::write(ws.join("output/big"), &big).unwrap();
    let d = fsops::read_file(&ws, "output/big", 0, u64::MAX).unwrap();
    assert_eq!(
        (d.data.len(), d.eof),
        (MAX_CHUNK_BYTES, false),
        "limit capped"
    );
    assert!(matches!(
        fsops::read_file(&ws, "output", 0, 1),
        Err(FsError::NotAFile(_))
    ));
    assert!(matches!(
        fsops::read_file(&ws, "", 0, 1),
        Err(FsError::NotAFile(_))
    ));
    assert_eq!(
        fsops::read_file(&ws, "output/none", 0, 1)
            .unwrap_err()
            .code(),
        ErrorCode::NotFound
    );
}

#[test]
fn write_mount_is_atomic_read_only_and_owned() {
    let t = TestDir::new("prims-fs-wm-");
    let ws = plain_workspace(&t, UID);
    let chunks = vec![b"a,b\n".to_vec(), b"1,2\n".to_vec()];
    assert_eq!(
        fsops::write_mount(&ws, "data/in/x.csv", 8, chunks, UID).unwrap(),
        8
    );
    let f = ws.join("mounts/data/in/x.csv");
    assert_eq!(fs::read(&f).unwrap(), b"a,b\n1,2\n");
    let m = fs::metadata(&f).unwrap();
    assert_eq!(m.permissions().mode() & 0o7777, 0o444);
    assert_eq!((m.uid(), m.gid()), (UID, UID));
    for d in ["mounts/data", "mounts/data/in"] {
        assert_eq!(fs::metadata(ws.join(d)).unwrap().uid(), UID, "{d}");
    }

    // Short and long uploads leave the earlier file and no temporary.
    for (size, data) in [(100u64, b"short".to_vec()), (2, b"too long".to_vec())] {
        let e = fsops::write_mount(&ws, "data/in/x.csv", size, vec![data], UID).unwrap_err();
        assert!(matches!(e, FsError::SizeMismatch { .. }), "{e}");
        assert_eq!(e.code(), ErrorCode::BadRequest);
    }
    let e = fsops::write_mount(&ws, "fresh.bin", 10, vec![b"12345".to_vec()], UID).unwrap_err();
    assert!(matches!(
        e,
        FsError::SizeMismatch {
            expected: 10,
            got: 5,
            ..
        }
    ));
    assert!(!ws.join("mounts/fresh.bin").exists());
    assert_eq!(fs::read(&f).unwrap(), b"a,b\n1,2\n");
    let names: Vec<_> = fs::read_dir(ws.join("mounts/data/in"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["x.csv"], "no temporary left");

    // A cancelled upload (the sender dropped) is a short one.
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(1);
    let writer = std::thread::spawn({
        let ws = ws.clone();
        move || fsops::write_mount(&ws, "stream.bin", 1 << 20, rx, UID)
    });
    tx.send(vec![0u8; 1000]).unwrap();
    drop(tx);
    assert!(matches!(
        writer.join().unwrap(),
        Err(FsError::SizeMismatch { got: 1000, .. })
    ));
    assert!(!ws.join("mounts/stream.bin").exists());

    // Replacing works; a directory in the way does not.
    fsops::write_mount(&ws, "data/in/x.csv", 3, vec![b"new".to_vec()], UID).unwrap();
    assert_eq!(fs::read(&f).unwrap(), b"new");
    assert!(fsops::write_mount(&ws, "data", 1, vec![b"x".to_vec()], UID).is_err());
    assert_eq!(
        fsops::write_mount(&ws, "", 0, Vec::<Vec<u8>>::new(), UID)
            .unwrap_err()
            .code(),
        ErrorCode::BadRequest
    );
    // Empty files are fine.
    assert_eq!(
        fsops::write_mount(&ws, "empty", 0, Vec::<Vec<u8>>::new(), UID).unwrap(),
        0
    );
}

#[test]
fn an_open_ended_mount_is_kept_only_when_ended_and_within_its_maximum() {
    let t = TestDir::new("prims-fs-wmu-");
    let ws = plain_workspace(&t, UID);
    let chunks = vec![b"a,b\n".to_vec(), b"1,2\n".to_vec(), b"3,4\n".to_vec()];
    let n = fsops::write_mount_up_to(&ws, "in/x.csv", 1 << 20, chunks, UID, || true).unwrap();
    assert_eq!(n, 12);
    let f = ws.join("mounts/in/x.csv");
    assert_eq!(fs::read(&f).unwrap(), b"a,b\n1,2\n3,4\n");
    let m = fs::metadata(&f).unwrap();
    assert_eq!(m.permissions().mode() & 0o7777, 0o444);
    assert_eq!((m.uid(), m.gid()), (UID, UID));
    // Exactly the maximum, and nothing at all, are whole files too.
    let exact = fsops::write_mount_up_to(&ws, "max", 4, vec![b"1234".to_vec()], UID, || true);
    assert_eq!(exact.unwrap(), 4);
    let none = Vec::<Vec<u8>>::new();
    assert_eq!(
        fsops::write_mount_up_to(&ws, "empty", 4, none, UID, || true).unwrap(),
        0
    );

    // Past the maximum: refused as a quota error; the earlier file stays.
    let long = vec![b"a,b\n".to_vec(), b"more than eight".to_vec()];
    let e = fsops::write_mount_up_to(&ws, "in/x.csv", 8, long, UID, || true).unwrap_err();
    assert!(matches!(e, FsError::TooLarge { max: 8, .. }), "{e}");
    assert_eq!(e.code(), ErrorCode::Quota);
    assert_eq!(fs::read(&f).unwrap(), b"a,b\n1,2\n3,4\n");

    // A stream that stops without being ended (cancel, disconnect) is not
    // a file, however plausible its length.
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(1);
    let writer = std::thread::spawn({
        let ws = ws.clone();
        move || fsops::write_mount_up_to(&ws, "cut.bin", 1 << 20, rx, UID, || false)
    });
    tx.send(vec![0u8; 1000]).unwrap();
    drop(tx);
    let e = writer.join().unwrap().unwrap_err();
    assert!(matches!(e, FsError::Incomplete { got: 1000, .. }), "{e}");
    assert_eq!(e.code(), ErrorCode::Cancelled);
    assert!(!ws.join("mounts/cut.bin").exists());

    let mut names: Vec<_> = fs::read_dir(ws.join("mounts"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["empty", "in", "max"], "no temporary left");
    let names: Vec<_> = fs::read_dir(ws.join("mounts/in"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["x.csv"], "no temporary left");
}

#[test]
fn snapshot_and_diff_report_new_and_changed_files() {
    let t = TestDir::new("prims-fs-diff-");
    let ws = plain_workspace(&t, UID);
    let out = ws.join("output");
    fs::write(out.join("same.txt"), "same").unwrap();
    fs::write(out.join("edit.txt"), "v1").unwrap();
    fs::write(out.join("touched.txt"), "aaaa").unwrap();
    fs::create_dir_all(out.join("sub/deeper")).unwrap();
    fs::write(out.join("sub/deeper/gone.csv"), "x").unwrap();
    let before = fsops::snapshot_output(&ws).unwrap();
    assert_eq!(before.len(), 4);

    // A "run": edit, rewrite in place keeping size and mtime, create, delete.
    fs::write(out.join("edit.txt"), "v2 longer").unwrap();
    let mtime = fs::metadata(out.join("touched.txt"))
        .unwrap()
        .modified()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    fs::write(out.join("touched.txt"), "bbbb").unwrap();
    fs::File::options()
        .write(true)
        .open(out.join("touched.txt"))
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    fs::write(out.join("sub/plot.png"), [0x89, b'P', b'N', b'G']).unwrap();
    fs::write(out.join("noext"), "?").unwrap();
    fs::remove_file(out.join("sub/deeper/gone.csv")).unwrap();
    let after = fsops::snapshot_output(&ws).unwrap();

    let files = fsops::diff(&before, &after);
    let got: Vec<_> = files
        .iter()
        .map(|f| (f.path.as_str(), f.size, f.mime.as_str(), f.changed))
        .collect();
    assert_eq!(
        got,
        [
            ("edit.txt", 9, "text/plain", true),
            ("noext", 1, "application/octet-stream", true),
            ("same.txt", 4, "text/plain", false),
            ("sub/plot.png", 4, "image/png", true),
            ("touched.txt", 4, "text/plain", true),
        ]
    );
    assert!(fsops::diff(&after, &after).iter().all(|f| !f.changed));
}

#[test]
fn snapshot_is_bounded_in_depth() {
    let t = TestDir::new("prims-fs-deep-");
    let ws = plain_workspace(&t, UID);
    let mut p = ws.join("output");
    for i in 0..40 {
        p = p.join(format!("d{i}"));
    }
    fs::create_dir_all(&p).unwrap();
    fs::write(p.join("deep.txt"), "x").unwrap();
    fs::write(ws.join("output/d0/shallow.txt"), "x").unwrap();
    let snap = fsops::snapshot_output(&ws).unwrap();
    assert!(snap.truncated);
    assert_eq!(snap.paths().collect::<Vec<_>>(), ["d0/shallow.txt"]);
    assert!(fsops::snapshot_output(&t.path.join("missing")).is_err());
}
