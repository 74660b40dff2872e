//! Shared by the sessions_* and fsops_* tests: root check, temporary state
//! directories that unmount what is under them even when a test fails, and
//! running a command as a session's uid.
#![allow(dead_code)]

use prims_supervisor::sessions::{QuotaMode, SessionPolicy};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

pub const MIB: u64 = 1 << 20;

pub fn require_root() {
    if !nix::unistd::geteuid().is_root() {
        panic!("these tests need root (loop devices, mount, chown); run them as root");
    }
}

/// A temporary directory under /var/tmp; on drop, everything mounted under
/// it is detached, then it is removed.
pub struct TestDir {
    pub path: PathBuf,
}

impl TestDir {
    pub fn new(prefix: &str) -> TestDir {
        require_root();
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in("/var/tmp")
            .expect("temp dir");
        let path = dir.keep();
        // Like a state dir: others may traverse, not list.
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o711))
            .expect("chmod");
        TestDir { path }
    }

    pub fn sessions(&self) -> PathBuf {
        self.path.join("sessions")
    }

    /// What the store's files call session `id`.
    pub fn name(&self, id: &str) -> String {
        prims_supervisor::sessions::SessionKey::load_or_create(&self.path)
            .expect("session key")
            .name_of(id)
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        unmount_under(&self.path);
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Mount points strictly under `dir`, deepest first.
pub fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let prefix = format!("{}/", dir.display());
    let mut out: Vec<PathBuf> = text
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|p| p.starts_with(&prefix))
        .map(PathBuf::from)
        .collect();
    out.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    out
}

pub fn unmount_under(dir: &Path) {
    for _ in 0..4 {
        let list = mounts_under(dir);
        if list.is_empty() {
            return;
        }
        for m in list {
            let _ = nix::mount::umount2(&m, nix::mount::MntFlags::MNT_DETACH);
        }
    }
}

pub fn is_mounted(dir: &Path) -> bool {
    mounts_under(dir.parent().unwrap()).iter().any(|m| m == dir)
}

pub fn policy(mode: QuotaMode) -> SessionPolicy {
    SessionPolicy {
        idle_ttl: Duration::from_secs(3600),
        disk_quota: 16 * MIB,
        max_sessions: 8,
        uid_base: 300_000,
        uid_count: 16,
        quota: mode,
        min_free_disk: 0,
        history_cells: 500,
        history_bytes: 16 * MIB,
    }
}

/// Runs `argv` as `uid`:`uid` with no supplementary groups, in `cwd`
/// (entered as root before the switch, so parent directories need not be
/// searchable by the uid).
pub fn run_as(uid: u32, cwd: &Path, argv: &[&str]) -> Output {
    Command::new("setpriv")
        .arg(format!("--reuid={uid}"))
        .arg(format!("--regid={uid}"))
        .arg("--clear-groups")
        .arg("--")
        .args(argv)
        .current_dir(cwd)
        .output()
        .expect("setpriv")
}

/// A plain workspace (no session store) for the fsops tests: `output/` and
/// `mounts/` owned by `uid`, inside a TestDir that also holds a host file
/// `secret.txt` next to the workspace.
pub fn plain_workspace(t: &TestDir, uid: u32) -> PathBuf {
    let ws = t.path.join("ws");
    std::fs::create_dir(&ws).unwrap();
    for dir in [ws.clone(), ws.join("output"), ws.join("mounts")] {
        std::fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::chown(&dir, Some(uid), Some(uid)).unwrap();
    }
    std::fs::write(t.path.join("secret.txt"), "TOPSECRET").unwrap();
    ws
}
