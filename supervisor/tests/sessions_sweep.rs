//! Idle expiry, and closing a session while a run holds it.

mod sessions_support;

use prims_supervisor::sessions::{QuotaMode, SessionError, SessionStore};
use sessions_support::*;
use std::time::{Duration, Instant, SystemTime};

#[test]
fn sweep_closes_idle_sessions_but_never_a_busy_one() {
    let t = TestDir::new("prims-sess-sweep-");
    let mut p = policy(QuotaMode::Loop);
    p.idle_ttl = Duration::from_secs(60);
    let store = SessionStore::open(&t.path, &p).unwrap();
    let idle = store.create(None).unwrap().session_id;
    let busy = store.create(None).unwrap().session_id;
    let busy_s = store.get(&busy, None).unwrap();
    let now = SystemTime::now();

    assert!(store.sweep(now, &|_| {}).is_empty(), "nothing is idle yet");
    let guard = busy_s.run_lock.try_lock().unwrap();
    let later = now + Duration::from_secs(120);
    let idle_name = store.name_of(&idle).unwrap();
    assert_eq!(store.sweep(later, &|_| {}), vec![idle_name.clone()]);
    assert!(matches!(
        store.get(&idle, None),
        Err(SessionError::NotFound)
    ));
    assert!(!t.sessions().join(&idle_name).exists());
    assert!(store.get(&busy, None).is_ok(), "a session in a run is kept");
    assert!(busy_s.workspace.join("output").is_dir());

    drop(guard);
    assert_eq!(
        store.sweep(later + Duration::from_secs(120), &|_| {}),
        vec![busy_s.name.clone()]
    );
    assert_eq!(store.len(), 0);
    assert!(!is_mounted(&busy_s.workspace));
}

#[test]
fn use_keeps_a_session_alive_and_ttl_reloads() {
    let t = TestDir::new("prims-sess-touch-");
    let mut p = policy(QuotaMode::None);
    p.idle_ttl = Duration::from_secs(60);
    let store = SessionStore::open(&t.path, &p).unwrap();
    let id = store.create(None).unwrap().session_id;
    let now = SystemTime::now();
    let s = store.get(&id, None).unwrap();
    store.touch(&s);
    assert!(store
        .sweep(now + Duration::from_secs(30), &|_| {})
        .is_empty());
    p.idle_ttl = Duration::from_secs(10);
    store.update_policy(&p);
    assert_eq!(
        store.sweep(now + Duration::from_secs(30), &|_| {}),
        vec![s.name.clone()]
    );
}

#[test]
fn closing_during_a_run_waits_for_it_then_frees_the_uid() {
    let t = TestDir::new("prims-sess-closerun-");
    let mut p = policy(QuotaMode::Loop);
    p.uid_count = 2; // a single session uid
    let store = SessionStore::open(&t.path, &p).unwrap();
    let id = store.create(None).unwrap().session_id;
    let s = store.get(&id, None).unwrap();
    let guard = s.run_lock.try_lock().unwrap();
    store.run_started(&s).unwrap();

    store.close(&id, None).unwrap();
    assert!(s.is_closed());
    assert!(matches!(store.get(&id, None), Err(SessionError::NotFound)));
    assert!(
        s.workspace.join("output").is_dir(),
        "files stay while the run holds the lock"
    );
    assert!(
        matches!(store.create(None), Err(SessionError::NoUid(1))),
        "uid not freed yet"
    );
    store.run_finished(&s);

    drop(guard);
    let deadline = Instant::now() + Duration::from_secs(10);
    while t.sessions().join(&s.name).exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        !t.sessions().join(&s.name).exists(),
        "removed once the run ended"
    );
    let mut again = None;
    while again.is_none() && Instant::now() < deadline {
        again = store.create(None).ok();
        std::thread::sleep(Duration::from_millis(10));
    }
    let again = again.expect("the uid comes back");
    assert_eq!(
        store.get(&again.session_id, None).unwrap().host_uid,
        s.host_uid
    );
}
