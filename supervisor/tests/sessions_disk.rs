//! Workspaces never overcommit the disk: each image is allocated in full
//! when its session is made, a session the disk cannot hold is refused at
//! creation, and no `fstrim` hands reserved blocks back.

mod sessions_support;

use prims_protocol::wire::ErrorCode;
use prims_supervisor::sessions::{QuotaMode, SessionError, SessionStore};
use sessions_support::*;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

/// A small ext4 filesystem of its own, loop-mounted under `t`: the disk
/// the state directory lives on.
fn small_disk(t: &TestDir, mib: u64) -> std::path::PathBuf {
    let img = t.path.join("disk.img");
    let mnt = t.path.join("disk");
    std::fs::create_dir(&mnt).unwrap();
    let f = std::fs::File::create(&img).unwrap();
    f.set_len(mib * MIB).unwrap();
    drop(f);
    let ok = |c: &mut Command| assert!(c.status().unwrap().success(), "{c:?}");
    ok(Command::new("mkfs.ext4")
        .args(["-q", "-F", "-m", "0"])
        .arg(&img));
    ok(Command::new("mount")
        .args(["-o", "loop"])
        .arg(&img)
        .arg(&mnt));
    std::fs::set_permissions(&mnt, std::os::unix::fs::PermissionsExt::from_mode(0o711)).unwrap();
    mnt
}

/// Writes 1 MiB blocks until the filesystem says no; returns what fit.
fn fill(dir: &Path) -> (u64, std::io::Error) {
    let mut f = std::fs::File::create(dir.join("fill")).unwrap();
    let block = vec![0x5au8; MIB as usize];
    let mut written = 0;
    loop {
        match f.write(&block) {
            Ok(n) => written += n as u64,
            Err(e) => return (written, e),
        }
        if let Err(e) = f.sync_data() {
            return (written, e);
        }
    }
}

#[test]
fn sessions_beyond_the_disk_are_refused_and_none_runs_short() {
    let t = TestDir::new("prims-sess-disk-");
    let state = small_disk(&t, 96);
    let mut p = policy(QuotaMode::Loop);
    p.disk_quota = 16 * MIB;
    p.min_free_disk = 8 * MIB;
    p.max_sessions = 64;
    let store = SessionStore::open(&state, &p).unwrap();
    let mut admitted = Vec::new();
    let refusal = loop {
        match store.create(None) {
            Ok(info) => admitted.push(info.session_id),
            Err(e) => break e,
        }
        assert!(
            admitted.len() < 10,
            "a 96 MiB disk admitted 10 sessions of 16 MiB"
        );
    };
    assert!(matches!(refusal, SessionError::NoDisk { .. }), "{refusal}");
    assert_eq!(refusal.code(), ErrorCode::Busy);
    let msg = refusal.to_string();
    assert!(
        msg.contains("sessions.min_free_disk") && msg.contains("sessions.disk_quota"),
        "{msg}"
    );
    assert!(admitted.len() >= 3, "only {} sessions fit", admitted.len());
    let free_after = prims_supervisor_free(&state);
    assert!(
        free_after < 16 * MIB + 8 * MIB,
        "refused although {free_after} bytes were free"
    );

    // Each admitted session can fill its whole workspace: the host disk
    // never runs out first, whatever the others do.
    for id in &admitted {
        let s = store.get(id, None).unwrap();
        let before = nix::sys::statvfs::statvfs(&s.workspace).unwrap();
        let room = before.blocks_available() * before.fragment_size();
        assert!(room > 14 * MIB, "{room}");
        let (written, err) = fill(&s.workspace.join("output"));
        assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
        assert!(
            written + 2 * MIB >= room,
            "session {} got ENOSPC after {written} of its {room} bytes",
            s.name
        );
        let img = state.join("sessions").join(format!("{}.img", s.name));
        assert!(
            std::fs::metadata(&img).unwrap().blocks() * 512 >= 16 * MIB,
            "image fully allocated"
        );
    }
    // The state filesystem itself still has its reserve.
    assert!(prims_supervisor_free(&state) > 0);
}

#[test]
fn fstrim_cannot_give_a_workspace_reservation_back() {
    let t = TestDir::new("prims-sess-trim-");
    let mut p = policy(QuotaMode::Loop);
    p.disk_quota = 32 * MIB;
    let store = SessionStore::open(&t.path, &p).unwrap();
    let id = store.create(None).unwrap().session_id;
    let s = store.get(&id, None).unwrap();
    let img = t.sessions().join(format!("{}.img", s.name));
    let allocated = || std::fs::metadata(&img).unwrap().blocks() * 512;
    assert!(
        allocated() >= 32 * MIB,
        "allocated when created: {}",
        allocated()
    );
    std::fs::write(s.workspace.join("output/tmp"), vec![1u8; 8 * MIB as usize]).unwrap();
    std::fs::remove_file(s.workspace.join("output/tmp")).unwrap();
    let out = Command::new("fstrim").arg(&s.workspace).output().unwrap();
    assert!(!out.status.success(), "fstrim trimmed a workspace: {out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not supported"),
        "{out:?}"
    );
    assert!(allocated() >= 32 * MIB, "still reserved: {}", allocated());
}

fn prims_supervisor_free(dir: &Path) -> u64 {
    let s = nix::sys::statvfs::statvfs(dir).unwrap();
    s.blocks_available() * s.fragment_size()
}

/// A fork template's place reserves a small workspace, not a session's
/// quota: a template runs no one's code, and on a small disk its place must
/// not keep the sessions out (here a session's quota beside a second would
/// not fit).
#[test]
fn a_template_home_reserves_a_small_workspace() {
    let t = TestDir::new("prims-sess-tmpl-");
    let state = small_disk(&t, 512);
    let mut p = policy(QuotaMode::Loop);
    p.disk_quota = 256 * MIB;
    p.min_free_disk = 64 * MIB;
    let store = SessionStore::open(&state, &p).unwrap();
    let home = store.create_template_home().unwrap();
    let image = find_image(&state, home.name()).expect("the template's image");
    let meta = std::fs::metadata(&image).unwrap();
    let limit = prims_supervisor::sessions::TEMPLATE_HOME_BYTES;
    assert_eq!(meta.len(), limit, "{}", image.display());
    assert!(
        meta.blocks() * 512 >= limit,
        "the template's image is reserved in full"
    );
    let session = store.create(None);
    assert!(
        session.is_ok(),
        "a session no longer fits beside a template's place: {session:?}"
    );
    store.discard(home);
}

/// The image file `<name>.img` below `dir`.
fn find_image(dir: &Path, name: &str) -> Option<std::path::PathBuf> {
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let p = e.path();
        if p.file_name().and_then(|n| n.to_str()) == Some(&format!("{name}.img")) {
            return Some(p);
        }
        if e.file_type().ok()?.is_dir() {
            if let Some(found) = find_image(&p, name) {
                return Some(found);
            }
        }
    }
    None
}
