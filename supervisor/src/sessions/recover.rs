//! Loading the store after a (re)start, and the idle sweep.

use super::error::SessionError;
use super::key::SessionKey;
use super::layout;
use super::meta::{self, is_valid_id};
use super::policy::SessionPolicy;
use super::run_flag;
use super::session::{lock, Session};
use super::shared::{Inner, Shared};
use super::uids::UidPool;
use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// The loaded state of `state_dir/sessions`; see [`super::store::SessionStore::open`].
pub(super) fn open(state_dir: &Path, policy: &SessionPolicy) -> Result<Arc<Shared>, SessionError> {
    let dir = state_dir.join("sessions");
    fs::create_dir_all(&dir).map_err(SessionError::io("creating the sessions directory"))?;
    let m = fs::symlink_metadata(&dir).map_err(SessionError::io("the sessions directory"))?;
    if !m.is_dir() {
        return Err(SessionError::Workspace(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    // The jailer reaches workspaces by path; nobody may list the ids.
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o711))
        .map_err(SessionError::io("chmod of the sessions directory"))?;
    let key = SessionKey::load_or_create(state_dir)?;
    super::migrate::rename_legacy(&dir, &key);
    let shared = Shared {
        dir,
        key,
        inner: Mutex::new(Inner {
            policy: policy.clone(),
            live: HashMap::new(),
            closing: HashMap::new(),
            creating: 0,
            spares: 0,
            uids: UidPool::default(),
        }),
    };
    load(&shared)?;
    Ok(Arc::new(shared))
}

#[derive(Default)]
struct Found {
    metas: BTreeSet<String>,
    dirs: BTreeSet<String>,
    images: BTreeSet<String>,
    histories: BTreeSet<String>,
    flags: BTreeSet<String>,
}

fn scan(dir: &Path) -> Result<Found, SessionError> {
    let mut found = Found::default();
    let entries = fs::read_dir(dir).map_err(SessionError::io("reading the sessions directory"))?;
    for entry in entries {
        let entry = entry.map_err(SessionError::io("reading the sessions directory"))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
        if let Some(name) = name.strip_suffix(".json").filter(|i| is_valid_id(i)) {
            found.metas.insert(name.to_string());
        } else if let Some(name) = name.strip_suffix(".img").filter(|i| is_valid_id(i)) {
            found.images.insert(name.to_string());
        } else if is_valid_id(&name) && is_dir {
            found.dirs.insert(name);
        } else if let Some(name) = name.strip_suffix(".cells").filter(|i| is_valid_id(i)) {
            found.histories.insert(name.to_string());
        } else if let Some(name) = name.strip_suffix(".run").filter(|i| is_valid_id(i)) {
            found.flags.insert(name.to_string());
        } else if name.starts_with('.')
            && (name.ends_with(".json.tmp") || name.ends_with(".cells.tmp"))
        {
            // A metadata or history write cut short; the rename never happened.
            let _ = fs::remove_file(entry.path());
        } else {
            tracing::warn!(
                name,
                "unexpected entry in the sessions directory; leaving it"
            );
        }
    }
    Ok(found)
}

fn load(sh: &Shared) -> Result<(), SessionError> {
    let found = scan(&sh.dir)?;
    let mut inner = lock(&sh.inner);
    for name in &found.metas {
        let mut m = match meta::read(&sh.dir, name) {
            Ok(m) => m,
            Err(e) => {
                tracing::error!(session = %name, error = %e, "unreadable session metadata; removing the session");
                remove(sh, &mut inner, name);
                continue;
            }
        };
        if m.format < meta::FORMAT {
            // rename_legacy could not move it under its name: keep its files
            // and its uid for a later start, but never serve it by a name
            // that is its id.
            tracing::error!("a session stored under its id could not be migrated; not loading it");
            inner.uids.reserve(m.host_uid);
            continue;
        }
        let s = |m| Arc::new(Session::from_meta(&sh.dir, m));
        if m.closing {
            finish_closing(sh, &mut inner, s(m));
            continue;
        }
        if m.spare {
            tracing::info!(session = %name, "removing a spare left by the last run of the pool");
            remove(sh, &mut inner, name);
            continue;
        }
        if m.disk_quota > 0 {
            if !layout::image_path(&sh.dir, name).exists() {
                tracing::warn!(session = %name, "the session's quota image vanished; dropping the session");
                remove(sh, &mut inner, name);
                continue;
            }
            match layout::ensure_mounted(&sh.dir, name) {
                Ok(true) => tracing::info!(session = %name, "mounted the workspace image again"),
                Ok(false) => {}
                Err(e) => {
                    // Its files stay for a later start; so does its uid.
                    tracing::error!(session = %name, error = %e, "cannot mount a session's workspace; not loading it");
                    inner.uids.reserve(m.host_uid);
                    continue;
                }
            }
        } else if !layout::workspace(&sh.dir, name).is_dir() {
            tracing::warn!(session = %name, "the session's workspace vanished; dropping the session");
            remove(sh, &mut inner, name);
            continue;
        }
        if !inner.uids.reserve(m.host_uid) {
            tracing::error!(session = %name, uid = m.host_uid, "uid already held by another session; not loading it");
            continue;
        }
        // `run_in_flight` is where older versions marked a run.
        let in_flight = m.run_in_flight
            || run_flag::raised(&sh.dir, name).unwrap_or_else(|e| {
                tracing::warn!(session = %name, error = %e, "cannot read the run flag; taking the last run as lost");
                true
            });
        if in_flight {
            tracing::warn!(session = %name, "a run was cut short by the restart");
            m.run_in_flight = false;
            m.last_run_lost = true;
            if let Err(e) = meta::write(&sh.dir, &m, meta::Durability::Durable) {
                tracing::warn!(session = %name, error = %e, "could not record the lost run");
            } else if let Err(e) = run_flag::lower(&sh.dir, name) {
                tracing::warn!(session = %name, error = %e, "could not clear the run flag");
            }
        }
        inner.live.insert(name.clone(), s(m));
    }
    for name in found.dirs.difference(&found.metas) {
        tracing::warn!(session = %name, "removing a half-created session");
        remove(sh, &mut inner, name);
    }
    for name in found.images.iter() {
        if !found.metas.contains(name) && !found.dirs.contains(name) {
            tracing::warn!(session = %name, "removing a stray quota image");
            remove(sh, &mut inner, name);
        }
    }
    for name in found.histories.iter() {
        if !found.metas.contains(name) && !found.dirs.contains(name) && !found.images.contains(name)
        {
            tracing::warn!(session = %name, "removing the history of a session that is gone");
            remove(sh, &mut inner, name);
        }
    }
    for name in found.flags.iter() {
        let known = [&found.metas, &found.dirs, &found.images, &found.histories];
        if !known.iter().any(|set| set.contains(name)) {
            tracing::warn!(session = %name, "removing the run flag of a session that is gone");
            remove(sh, &mut inner, name);
        }
    }
    Ok(())
}

/// Removes the files of a session that is not loaded; if that fails, the
/// owner of its workspace stays out of the uid pool.
fn remove(sh: &Shared, inner: &mut Inner, name: &str) {
    let owner = layout::owner(&sh.dir, name);
    if let Err(e) = layout::teardown(&sh.dir, name) {
        tracing::error!(session = %name, error = %e, "could not remove a session's files");
        if let Some(uid) = owner {
            inner.uids.reserve(uid);
        }
    }
}

fn finish_closing(sh: &Shared, inner: &mut Inner, s: Arc<Session>) {
    tracing::info!(session = %s.name, "finishing the close of a session");
    if let Err(e) = layout::teardown(&sh.dir, &s.name) {
        tracing::error!(session = %s.name, error = %e, "removing a closed session failed; will retry");
        inner.uids.reserve(s.host_uid);
        inner.closing.insert(s.name.clone(), s);
    }
}

pub(super) fn sweep(
    sh: &Arc<Shared>,
    now: SystemTime,
    before_removal: &dyn Fn(&str),
) -> Vec<String> {
    let (pending, idle): (Vec<_>, Vec<_>) = {
        let inner = lock(&sh.inner);
        let ttl = inner.policy.idle_ttl;
        let idle = inner
            .live
            .values()
            .filter(|s| is_idle(s, now, ttl))
            .cloned()
            .collect();
        (inner.closing.values().cloned().collect(), idle)
    };
    for s in pending {
        if let Ok(guard) = s.run_lock.try_lock() {
            let _ = sh.finish_close(&s, guard);
        }
    }
    let mut closed = Vec::new();
    for s in idle {
        // Never one in a run; the lock is held across the removal.
        let Ok(guard) = s.run_lock.try_lock() else {
            continue;
        };
        {
            let mut inner = lock(&sh.inner);
            // Used, or closed, since the list was made?
            if !inner.live.contains_key(&s.name) || !is_idle(&s, now, inner.policy.idle_ttl) {
                continue;
            }
            inner.live.remove(&s.name);
            inner.closing.insert(s.name.clone(), s.clone());
        }
        tracing::info!(session = %s.name, "closing an idle session");
        sh.begin_close(&s);
        before_removal(&s.name);
        let _ = sh.finish_close(&s, guard);
        closed.push(s.name.clone());
    }
    closed
}

fn is_idle(s: &Session, now: SystemTime, ttl: std::time::Duration) -> bool {
    now.duration_since(s.last_used())
        .is_ok_and(|idle| idle > ttl)
}
