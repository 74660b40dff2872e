//! Creating, inspecting and closing sessions; isolation, limits, bad ids.

mod sessions_support;

use prims_protocol::wire::ErrorCode;
use prims_supervisor::sessions::{is_valid_id, QuotaMode, SessionError, SessionStore};
use sessions_support::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

#[test]
fn create_info_close_with_a_quota_image() {
    let t = TestDir::new("prims-sess-life-");
    let p = policy(QuotaMode::Loop);
    let store = SessionStore::open(&t.path, &p).unwrap();
    let info = store.create(Some("acme".into())).unwrap();
    let id = info.session_id.clone();
    assert!(is_valid_id(&id), "{id}");
    assert_eq!(info.tenant.as_deref(), Some("acme"));
    assert_eq!(info.disk_quota_bytes, 16 * MIB);
    assert!(info.disk_used_bytes < MIB, "{}", info.disk_used_bytes);
    assert!(!info.last_run_lost);
    assert!(info.created > 0 && info.last_used >= info.created);
    assert_eq!(store.len(), 1);

    let s = store.get(&id, Some("acme")).unwrap();
    let name = store.name_of(&id).unwrap();
    assert_eq!(s.name, name);
    let ws = t.sessions().join(&name);
    assert_eq!(s.workspace, ws);
    assert!((p.uid_base..p.uid_base + p.uid_count - 1).contains(&s.host_uid));
    assert!(is_mounted(&ws), "the workspace is the image's mount point");
    let root = std::fs::metadata(&ws).unwrap();
    assert_eq!((root.uid(), root.gid()), (s.host_uid, s.host_uid));
    assert_eq!(root.permissions().mode() & 0o777, 0o700);
    let mut names: Vec<String> = std::fs::read_dir(&ws)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["mounts", "output"], "nothing else, no lost+found");
    for sub in ["output", "mounts"] {
        let m = std::fs::metadata(ws.join(sub)).unwrap();
        assert_eq!(m.uid(), s.host_uid, "{sub}");
    }
    let json = t.sessions().join(format!("{name}.json"));
    let meta: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(meta["host_uid"], s.host_uid);
    assert_eq!(meta["tenant"], "acme");
    assert_eq!(
        std::fs::metadata(&json).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let img = t.sessions().join(format!("{name}.img"));
    let img_meta = std::fs::metadata(&img).unwrap();
    assert_eq!(img_meta.len(), 16 * MIB);
    assert!(
        img_meta.blocks() * 512 >= 16 * MIB,
        "the image is allocated in full: the quota is a reservation"
    );

    store.close(&id, Some("acme")).unwrap();
    assert_eq!(store.len(), 0);
    assert!(matches!(
        store.get(&id, Some("acme")),
        Err(SessionError::NotFound)
    ));
    assert!(matches!(
        store.close(&id, Some("acme")),
        Err(SessionError::NotFound)
    ));
    assert!(!is_mounted(&ws));
    for gone in [&ws, &json, &img] {
        assert!(!gone.exists(), "{} left behind", gone.display());
    }
    assert!(s.is_closed());
}

#[test]
fn sessions_are_isolated() {
    let t = TestDir::new("prims-sess-iso-");
    let store = SessionStore::open(&t.path, &policy(QuotaMode::Loop)).unwrap();
    let a = store
        .get(&store.create(None).unwrap().session_id, None)
        .unwrap();
    let b = store
        .get(&store.create(None).unwrap().session_id, None)
        .unwrap();
    assert_ne!(a.name, b.name);
    assert_ne!(a.host_uid, b.host_uid);
    assert_ne!(a.workspace, b.workspace);
    std::fs::write(a.workspace.join("output/a.txt"), "a").unwrap();
    let listed = prims_supervisor::fsops::list_dir(&b.workspace, "output").unwrap();
    assert!(listed.is_empty(), "{listed:?}");
    let out = run_as(
        b.host_uid,
        &b.workspace,
        &[
            "cat",
            &a.workspace.join("output/a.txt").display().to_string(),
        ],
    );
    assert!(!out.status.success(), "b's uid must not read a's files");
}

#[test]
fn the_build_uid_is_never_given_and_uids_are_reused() {
    let t = TestDir::new("prims-sess-uid-");
    let mut p = policy(QuotaMode::None);
    p.uid_count = 3;
    let store = SessionStore::open(&t.path, &p).unwrap();
    let a = store.create(None).unwrap().session_id;
    let b = store.create(None).unwrap().session_id;
    let uids = [
        store.get(&a, None).unwrap().host_uid,
        store.get(&b, None).unwrap().host_uid,
    ];
    assert_eq!(uids, [p.uid_base, p.uid_base + 1]);
    let e = store.create(None).unwrap_err();
    assert!(matches!(e, SessionError::NoUid(2)), "{e}");
    assert_eq!(e.code(), ErrorCode::Busy);
    store.close(&a, None).unwrap();
    let c = store.create(None).unwrap().session_id;
    assert_eq!(
        store.get(&c, None).unwrap().host_uid,
        p.uid_base,
        "freed uid reused"
    );
}

#[test]
fn max_sessions_is_enforced_and_reloadable() {
    let t = TestDir::new("prims-sess-max-");
    let mut p = policy(QuotaMode::None);
    p.max_sessions = 2;
    let store = SessionStore::open(&t.path, &p).unwrap();
    store.create(None).unwrap();
    store.create(None).unwrap();
    let e = store.create(None).unwrap_err();
    assert!(matches!(e, SessionError::TooMany(2)));
    assert!(e.to_string().contains("max_sessions"), "{e}");
    assert_eq!(e.to_reply().code, ErrorCode::Busy);
    p.max_sessions = 3;
    store.update_policy(&p);
    store.create(None).unwrap();
    assert_eq!(store.len(), 3);
}

#[test]
fn bad_ids_never_reach_the_filesystem() {
    let t = TestDir::new("prims-sess-ids-");
    let store = SessionStore::open(&t.path, &policy(QuotaMode::None)).unwrap();
    let id = store.create(None).unwrap().session_id;
    let upper = id.to_uppercase();
    for bad in [
        "",
        "..",
        "../../etc/passwd",
        "/etc",
        &upper,
        &id[..31],
        &format!("{id}/.."),
    ] {
        let e = store.get(bad, None).unwrap_err();
        assert!(matches!(e, SessionError::BadId(_)), "{bad}: {e}");
        assert_eq!(e.code(), ErrorCode::BadRequest);
        assert!(matches!(
            store.close(bad, None),
            Err(SessionError::BadId(_))
        ));
        assert!(matches!(store.info(bad, None), Err(SessionError::BadId(_))));
    }
    let unknown = "0123456789abcdef0123456789abcdef";
    assert_eq!(
        store.info(unknown, None).unwrap_err().code(),
        ErrorCode::NotFound
    );
    assert_eq!(store.len(), 1);
}

#[test]
fn tenants_are_checked() {
    let t = TestDir::new("prims-sess-tenant-");
    let store = SessionStore::open(&t.path, &policy(QuotaMode::None)).unwrap();
    for bad in ["a\nb".to_string(), "x".repeat(300)] {
        let e = store.create(Some(bad)).unwrap_err();
        assert_eq!(e.code(), ErrorCode::BadRequest, "{e}");
    }
    assert_eq!(store.len(), 0);
}

#[test]
fn no_quota_mode_uses_a_plain_directory() {
    let t = TestDir::new("prims-sess-none-");
    let store = SessionStore::open(&t.path, &policy(QuotaMode::None)).unwrap();
    let info = store.create(None).unwrap();
    assert_eq!(info.disk_quota_bytes, 0, "not enforced, and says so");
    let id = info.session_id;
    let s = store.get(&id, None).unwrap();
    assert!(!is_mounted(&s.workspace));
    assert!(!t.sessions().join(format!("{}.img", s.name)).exists());
    std::fs::write(s.workspace.join("output/big"), vec![7u8; 3 * MIB as usize]).unwrap();
    let used = store.info(&id, None).unwrap().disk_used_bytes;
    assert!(used >= 3 * MIB, "{used}");
    store.close(&id, None).unwrap();
    assert!(!s.workspace.exists());
}
