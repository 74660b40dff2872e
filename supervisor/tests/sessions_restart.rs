//! What survives a restart of the supervisor, and how a crash is cleaned up.

mod sessions_support;

use prims_supervisor::sessions::{QuotaMode, SessionStore};
use sessions_support::*;
use std::fs;
use std::path::Path;

fn edit_meta(sessions: &Path, name: &str, f: impl FnOnce(&mut serde_json::Value)) {
    let path = sessions.join(format!("{name}.json"));
    let mut v: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    f(&mut v);
    fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
}

fn read_meta(sessions: &Path, name: &str) -> serde_json::Value {
    serde_json::from_slice(&fs::read(sessions.join(format!("{name}.json"))).unwrap()).unwrap()
}

#[test]
fn sessions_survive_a_restart() {
    let t = TestDir::new("prims-sess-persist-");
    let p = policy(QuotaMode::Loop);
    let (a, b, uids) = {
        let store = SessionStore::open(&t.path, &p).unwrap();
        let a = store.create(Some("t1".into())).unwrap();
        let b = store.create(None).unwrap();
        let sa = store.get(&a.session_id, Some("t1")).unwrap();
        fs::write(sa.workspace.join("output/kept.txt"), "still here").unwrap();
        let uids = [
            sa.host_uid,
            store.get(&b.session_id, None).unwrap().host_uid,
        ];
        (a, b, uids)
    };
    let store = SessionStore::open(&t.path, &p).unwrap();
    assert_eq!(store.len(), 2);
    let a2 = store.info(&a.session_id, Some("t1")).unwrap();
    assert_eq!((a2.tenant.as_deref(), a2.created), (Some("t1"), a.created));
    assert!(!a2.last_run_lost);
    let sa = store.get(&a.session_id, Some("t1")).unwrap();
    assert_eq!(sa.host_uid, uids[0]);
    assert_eq!(
        fs::read_to_string(sa.workspace.join("output/kept.txt")).unwrap(),
        "still here"
    );
    assert_eq!(store.get(&b.session_id, None).unwrap().host_uid, uids[1]);
    let c = store.create(None).unwrap();
    let uc = store.get(&c.session_id, None).unwrap().host_uid;
    assert!(
        !uids.contains(&uc),
        "a restart must not hand out a taken uid"
    );
}

#[test]
fn a_crash_mid_run_is_recovered() {
    let t = TestDir::new("prims-sess-crash-");
    let p = policy(QuotaMode::Loop);
    let (a, b) = {
        let store = SessionStore::open(&t.path, &p).unwrap();
        let a = store.create(None).unwrap().session_id;
        let b = store.create(None).unwrap().session_id;
        let sa = store.get(&a, None).unwrap();
        fs::write(sa.workspace.join("output/partial.csv"), "1,2\n").unwrap();
        // a: the daemon recorded the run start; b: as older versions did,
        // in its metadata (set by hand below).
        store.run_started(&sa).unwrap();
        assert_eq!(run_flag(&t, &a), "1");
        assert_eq!(read_meta(&t.sessions(), &sa.name)["run_in_flight"], false);
        (a, b)
    };
    edit_meta(&t.sessions(), &t.name(&b), |v| {
        v["run_in_flight"] = true.into()
    });
    // A reboot, or a new mount namespace: the images are no longer mounted.
    for id in [&a, &b] {
        let ws = t.sessions().join(t.name(id));
        nix::mount::umount2(&ws, nix::mount::MntFlags::empty()).unwrap();
        assert!(!is_mounted(&ws));
    }

    let store = SessionStore::open(&t.path, &p).unwrap();
    assert_eq!(store.len(), 2);
    for id in [&a, &b] {
        let ws = t.sessions().join(t.name(id));
        assert!(is_mounted(&ws), "remounted");
        assert!(store.info(id, None).unwrap().last_run_lost);
        assert_eq!(
            read_meta(&t.sessions(), &t.name(id))["run_in_flight"],
            false
        );
    }
    assert_eq!(run_flag(&t, &a), "0", "cleared once the loss is recorded");
    let sa = store.get(&a, None).unwrap();
    assert_eq!(
        fs::read_to_string(sa.workspace.join("output/partial.csv")).unwrap(),
        "1,2\n"
    );
    // The next run supersedes the lost one.
    store.run_started(&sa).unwrap();
    store.run_finished(&sa);
    assert!(!store.info(&a, None).unwrap().last_run_lost);
    assert_eq!(read_meta(&t.sessions(), &sa.name)["last_run_lost"], false);
    assert_eq!(run_flag(&t, &a), "0");
    // A closed session leaves no flag behind.
    store.close(&a, None).unwrap();
    assert!(!t.sessions().join(format!("{}.run", t.name(&a))).exists());
}

/// The session's `<name>.run` byte.
fn run_flag(t: &TestDir, id: &str) -> String {
    fs::read_to_string(t.sessions().join(format!("{}.run", t.name(id)))).unwrap()
}

#[test]
fn an_image_unmounted_while_running_is_mounted_again_on_get() {
    let t = TestDir::new("prims-sess-remount-");
    let store = SessionStore::open(&t.path, &policy(QuotaMode::Loop)).unwrap();
    let id = store.create(None).unwrap().session_id;
    let ws = t.sessions().join(t.name(&id));
    nix::mount::umount2(&ws, nix::mount::MntFlags::empty()).unwrap();
    let s = store.get(&id, None).unwrap();
    assert!(
        is_mounted(&s.workspace),
        "no run may write into the bare directory"
    );
    assert!(s.workspace.join("output").is_dir());
}

#[test]
fn half_created_sessions_and_strays_are_removed() {
    let t = TestDir::new("prims-sess-half-");
    let p = policy(QuotaMode::Loop);
    let mounted_orphan = {
        let store = SessionStore::open(&t.path, &p).unwrap();
        let id = store.create(None).unwrap().session_id;
        let name = t.name(&id);
        // Crash after the image was mounted, before the metadata was written.
        fs::remove_file(t.sessions().join(format!("{name}.json"))).unwrap();
        name
    };
    let sessions = t.sessions();
    let half = "00000000000000000000000000000001";
    fs::create_dir_all(sessions.join(half).join("output/deep")).unwrap();
    fs::write(sessions.join(half).join("output/deep/f"), "x").unwrap();
    let stray_img = sessions.join("00000000000000000000000000000002.img");
    fs::write(&stray_img, "junk").unwrap();
    let tmp = sessions.join(".00000000000000000000000000000003.json.tmp");
    fs::write(&tmp, "{").unwrap();
    let stray_flag = sessions.join("00000000000000000000000000000004.run");
    fs::write(&stray_flag, "1").unwrap();
    let unknown = sessions.join("NOTES");
    fs::write(&unknown, "admin's file").unwrap();

    let store = SessionStore::open(&t.path, &p).unwrap();
    assert_eq!(store.len(), 0);
    let ws = sessions.join(&mounted_orphan);
    assert!(!is_mounted(&ws));
    for gone in [
        ws.clone(),
        sessions.join(format!("{mounted_orphan}.img")),
        sessions.join(half),
        stray_img,
        tmp,
        stray_flag,
    ] {
        assert!(!gone.exists(), "{} left behind", gone.display());
    }
    assert!(unknown.exists(), "files that are not ours stay");
}

#[test]
fn a_session_whose_image_vanished_is_dropped() {
    let t = TestDir::new("prims-sess-vanish-");
    let p = policy(QuotaMode::Loop);
    let id = {
        let store = SessionStore::open(&t.path, &p).unwrap();
        t.name(&store.create(None).unwrap().session_id)
    };
    let ws = t.sessions().join(&id);
    nix::mount::umount2(&ws, nix::mount::MntFlags::empty()).unwrap();
    fs::remove_file(t.sessions().join(format!("{id}.img"))).unwrap();
    let store = SessionStore::open(&t.path, &p).unwrap();
    assert_eq!(store.len(), 0);
    assert!(!ws.exists());
    assert!(!t.sessions().join(format!("{id}.json")).exists());
}

#[test]
fn a_close_cut_short_is_finished_on_restart() {
    let t = TestDir::new("prims-sess-closing-");
    let p = policy(QuotaMode::Loop);
    let id = {
        let store = SessionStore::open(&t.path, &p).unwrap();
        t.name(&store.create(None).unwrap().session_id)
    };
    edit_meta(&t.sessions(), &id, |v| v["closing"] = true.into());
    let store = SessionStore::open(&t.path, &p).unwrap();
    assert_eq!(store.len(), 0);
    let ws = t.sessions().join(&id);
    assert!(!is_mounted(&ws));
    assert!(!ws.exists());
    assert!(!t.sessions().join(format!("{id}.img")).exists());
}

#[test]
fn unreadable_metadata_removes_the_session() {
    let t = TestDir::new("prims-sess-badmeta-");
    let p = policy(QuotaMode::None);
    let id = {
        let store = SessionStore::open(&t.path, &p).unwrap();
        t.name(&store.create(None).unwrap().session_id)
    };
    fs::write(t.sessions().join(format!("{id}.json")), "not json").unwrap();
    let store = SessionStore::open(&t.path, &p).unwrap();
    assert_eq!(store.len(), 0);
    assert!(!t.sessions().join(&id).exists());
}
