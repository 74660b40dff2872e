//! Session ids are capabilities: nothing the store leaves on disk or in
//! the kernel's tables names one, every call is checked against its tenant,
//! and sessions an earlier version stored under their ids move under their
//! names without losing a byte.

mod sessions_support;

use prims_protocol::wire::ErrorCode;
use prims_supervisor::sessions::{QuotaMode, SessionError, SessionStore, KEY_FILE};
use sessions_support::*;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Every file name and file content under `dir` (not following mounts'
/// contents of other sessions: it reads everything, as root).
fn everything_under(dir: &Path, out: &mut String) {
    for e in fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        out.push_str(&e.file_name().to_string_lossy());
        out.push('\n');
        let t = e.file_type().unwrap();
        if t.is_dir() {
            everything_under(&e.path(), out);
        } else if t.is_file() && e.metadata().unwrap().len() < (1 << 20) {
            out.push_str(&String::from_utf8_lossy(&fs::read(e.path()).unwrap()));
        }
    }
}

fn loop_backing_files() -> String {
    let mut all = String::new();
    for e in fs::read_dir("/sys/block").unwrap().flatten() {
        if let Ok(b) = fs::read_to_string(e.path().join("loop/backing_file")) {
            all.push_str(&b);
        }
    }
    all
}

#[test]
fn no_id_is_written_anywhere_a_local_user_could_look() {
    let t = TestDir::new("prims-sess-names-");
    let store = SessionStore::open(&t.path, &policy(QuotaMode::Loop)).unwrap();
    let ids: Vec<String> = (0..3)
        .map(|_| store.create(Some("acme".into())).unwrap().session_id)
        .collect();
    let mut disk = String::new();
    everything_under(&t.path, &mut disk);
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap();
    let loops = loop_backing_files();
    for id in &ids {
        let name = store.name_of(id).unwrap();
        assert_ne!(&name, id);
        assert!(disk.contains(&name), "the session is stored by name");
        assert!(
            mountinfo.contains(&name),
            "its workspace is mounted by name"
        );
        assert!(loops.contains(&name), "its image is attached by name");
        for (what, text) in [
            ("a file name or file under the state dir", &disk),
            ("the mount table", &mountinfo),
            ("a loop device's backing file", &loops),
        ] {
            assert!(!text.contains(id.as_str()), "session id found in {what}");
        }
    }
    let key = fs::metadata(t.path.join(KEY_FILE)).unwrap();
    assert_eq!(
        key.permissions().mode() & 0o777,
        0o600,
        "only root reads the key"
    );
}

#[test]
fn another_tenant_cannot_reach_a_session() {
    let t = TestDir::new("prims-sess-tenants-");
    let store = SessionStore::open(&t.path, &policy(QuotaMode::None)).unwrap();
    let a = store.create(Some("a".into())).unwrap().session_id;
    let untenanted = store.create(None).unwrap().session_id;
    for (id, wrong) in [
        (&a, None),
        (&a, Some("b")),
        (&a, Some("A")),
        (&untenanted, Some("a")),
    ] {
        for e in [
            store.get(id, wrong).unwrap_err(),
            store.info(id, wrong).unwrap_err(),
            store.close(id, wrong).unwrap_err(),
        ] {
            assert!(matches!(e, SessionError::NotFound), "{wrong:?}: {e}");
            assert_eq!(e.code(), ErrorCode::NotFound);
            assert!(!e.to_string().contains(id.as_str()), "{e}");
        }
    }
    assert_eq!(store.len(), 2, "nothing was closed");
    assert_eq!(
        store.info(&a, Some("a")).unwrap().tenant.as_deref(),
        Some("a")
    );
    store.close(&untenanted, None).unwrap();
    store.close(&a, Some("a")).unwrap();
    assert!(store.is_empty());
}

/// Lays a session out as format 1 did: `<id>/`, `<id>.img`, and `<id>.json`
/// holding `"id"` and no format.
fn make_legacy(t: &TestDir, id: &str) {
    let (dir, name) = (t.sessions(), t.name(id));
    let ws = dir.join(&name);
    nix::mount::umount2(&ws, nix::mount::MntFlags::empty()).unwrap();
    fs::rename(&ws, dir.join(id)).unwrap();
    fs::rename(
        dir.join(format!("{name}.img")),
        dir.join(format!("{id}.img")),
    )
    .unwrap();
    let meta_path = dir.join(format!("{name}.json"));
    let mut meta: serde_json::Value =
        serde_json::from_slice(&fs::read(&meta_path).unwrap()).unwrap();
    let obj = meta.as_object_mut().unwrap();
    obj.remove("name");
    obj.remove("format");
    obj.insert("id".into(), id.into());
    fs::write(
        dir.join(format!("{id}.json")),
        serde_json::to_vec(&meta).unwrap(),
    )
    .unwrap();
    fs::remove_file(meta_path).unwrap();
}

#[test]
fn sessions_stored_under_their_ids_move_under_their_names() {
    let t = TestDir::new("prims-sess-legacy-");
    let p = policy(QuotaMode::Loop);
    let (id, uid) = {
        let store = SessionStore::open(&t.path, &p).unwrap();
        let id = store.create(Some("t".into())).unwrap().session_id;
        let s = store.get(&id, Some("t")).unwrap();
        fs::write(s.workspace.join("output/kept.txt"), "still here").unwrap();
        (id, s.host_uid)
    };
    make_legacy(&t, &id);
    // As the old version left it: the image mounted on a directory named by the id.
    let legacy_ws = t.sessions().join(&id);
    let dev = {
        let store_img = t.sessions().join(format!("{id}.img"));
        let out = std::process::Command::new("mount")
            .args(["-o", "loop,nosuid,nodev"])
            .arg(&store_img)
            .arg(&legacy_ws)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        store_img
    };
    assert!(is_mounted(&legacy_ws));

    let store = SessionStore::open(&t.path, &p).unwrap();
    assert_eq!(store.len(), 1);
    let s = store.get(&id, Some("t")).unwrap();
    assert_eq!(s.host_uid, uid);
    assert_eq!(
        fs::read_to_string(s.workspace.join("output/kept.txt")).unwrap(),
        "still here"
    );
    assert!(is_mounted(&s.workspace));
    assert!(
        !legacy_ws.exists() && !dev.exists(),
        "nothing is left under the id"
    );
    let mut disk = String::new();
    everything_under(&t.sessions(), &mut disk);
    assert!(
        !disk.contains(id.as_str()),
        "the id is gone from the state dir"
    );
    assert!(!fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .contains(id.as_str()));
}
