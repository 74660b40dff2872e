//! Branching requests, in phases. A fork: check the count, take the
//! source's turn (after the calls sent before it), hold it while its agent
//! saves its globals and its files are copied into each new session, let
//! it go, then give each branch an interpreter that restores the globals
//! in its own jail. A checkpoint: the same save and copy, into the
//! supervisor's checkpoint store. A rollback: the session's interpreter
//! ends, its files are replaced by the checkpoint's, and a new interpreter
//! restores the checkpoint's globals.

use super::replies::{bad_request, internal};
use super::room::{budget_refused, room_on_host, unless_image, within};
use super::run::unless_cancelled;
use super::state::Daemon;
use crate::checkpoints::{self, is_checkpoint_id, Pending};
use crate::fsops::{self, Copied, CopyLimits, FsError};
use crate::interpreters::branch::{Held, Profile, BRANCH_REL, SAVED_GLOBALS, STATE_REL};
use crate::interpreters::channel::Named;
use crate::interpreters::ipython::IpythonLayer;
use crate::server::Ctx;
use crate::sessions::Session;
use prims_policy::Policy;
use prims_protocol::branch::{Branch, CheckpointInfo, ForkReply, RestoreReply};
use prims_protocol::wire::{ErrorCode, ErrorReply, NotRestored, Reply, SessionInfo};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

pub(super) async fn fork(
    d: &Arc<Daemon>,
    (session_id, tenant): (String, Option<String>),
    count: u32,
    ctx: Ctx,
) -> Result<Reply, ErrorReply> {
    let policy = d.policy();
    let max = policy.branches.max_forks;
    if count == 0 || count > max {
        return Err(bad_request(format!(
            "count is {count}; a fork makes 1 to {max} sessions (branches.max_forks)"
        )));
    }
    // The source and its branches must be live together: a fork past that
    // would stop its own branches, or the source, for room as it made them.
    let live = policy
        .interpreters
        .max_live_per_tenant
        .min(policy.interpreters.max_live);
    if count >= live {
        return Err(bad_request(format!(
            "count is {count}; the source and its branches must all be live at once, and this \
             server keeps at most {live} interpreters of one client live \
             (interpreters.max_live_per_tenant, interpreters.max_live): fork at most {}",
            live.saturating_sub(1)
        )));
    }
    if d.draining.load(std::sync::atomic::Ordering::Relaxed) {
        return Err(ErrorReply {
            code: ErrorCode::Draining,
            message: "this node is draining for a restart and opens no new session".into(),
        });
    }
    let source = d.session(session_id, tenant.clone()).await?;
    let started = Instant::now();
    let turn = unless_cancelled(&ctx, source.run_lock.lock()).await?;
    // The new sessions are made before the source is held: its pause is
    // only the save and the copy.
    let spare_fits = d
        .interpreters
        .spare_fits(&d.interpreters.profile(&source).await);
    let made = new_sessions(d, &policy, tenant.as_deref(), count, spare_fits).await?;
    if let Err(e) = mark_lineage(d, &source, &made).await {
        close_all(d, &made).await;
        return Err(e);
    }
    let paused = Instant::now();
    let held = match d.interpreters.hold(&policy, &source, false).await {
        Ok(h) => h,
        Err(e) => {
            close_all(d, &made).await;
            return Err(internal(e));
        }
    };
    let keep = policy.sessions.min_free_disk.0;
    let copied = copy_into(d, (&source, &held), &made, keep).await;
    let source_paused_ms = paused.elapsed().as_millis() as u64;
    let profile = held.profile.clone();
    let (with_globals, unsaved) = (held.globals.is_some(), held.unsaved.clone());
    release(d, &source, held).await;
    drop(turn);
    if let Err(e) = copied {
        close_all(d, &made).await;
        return Err(e);
    }
    let mut sessions = Vec::with_capacity(made.len());
    let gives = made.iter().map(|(info, s)| async {
        if !with_globals && unsaved.is_empty() {
            return Ok(Branch {
                session_id: info.session_id.clone(),
                restored: Vec::new(),
                not_restored: Vec::new(),
            });
        }
        let c = give(d, &policy, s, &profile, unsaved.clone()).await?;
        Ok::<_, ErrorReply>(Branch {
            session_id: info.session_id.clone(),
            restored: c.0,
            not_restored: c.1,
        })
    });
    let given = futures::future::join_all(gives).await;
    let mut failed = None;
    for g in given {
        match g {
            Ok(b) => sessions.push(b),
            Err(e) => failed = Some(e),
        }
    }
    if let Some(e) = failed {
        close_all(d, &made).await;
        return Err(e);
    }
    Ok(Reply::Forked(ForkReply {
        sessions,
        duration_ms: started.elapsed().as_millis() as u64,
        source_paused_ms,
    }))
}

/// `count` new sessions of `tenant`, made side by side: pool spares when
/// they fit, else made now. Either all, or none (those made are closed
/// again).
async fn new_sessions(
    d: &Arc<Daemon>,
    policy: &Arc<Policy>,
    tenant: Option<&str>,
    count: u32,
    spare_fits: bool,
) -> Result<Vec<(SessionInfo, Arc<Session>)>, ErrorReply> {
    let makes = (0..count).map(|_| {
        let (sessions, live, t, p) = (
            d.sessions.clone(),
            d.interpreters.clone(),
            tenant.map(str::to_owned),
            policy.clone(),
        );
        d.blocking(move || {
            let info = match spare_fits.then(|| live.claim(&sessions, t.clone(), &p)) {
                Some(Some(info)) => info,
                _ => sessions.create(t.clone()).map_err(|e| e.to_reply())?,
            };
            let s = sessions
                .get(&info.session_id, t.as_deref())
                .map_err(|e| e.to_reply())?;
            Ok((info, s))
        })
    });
    let mut made = Vec::new();
    let mut failed = None;
    for m in futures::future::join_all(makes).await {
        match m {
            Ok(b) => made.push(b),
            Err(e) => failed = Some(e),
        }
    }
    if let Some(e) = failed {
        close_all(d, &made).await;
        return Err(e);
    }
    Ok(made)
}

/// Records each branch in `made` as of `source`'s lineage, whose budget
/// its checkpoints share when it has no tenant (see
/// `checkpoints::Account`).
async fn mark_lineage(
    d: &Arc<Daemon>,
    source: &Session,
    made: &[(SessionInfo, Arc<Session>)],
) -> Result<(), ErrorReply> {
    let lineage = source.lineage();
    let (sessions, branches): (_, Vec<Arc<Session>>) = (
        d.sessions.clone(),
        made.iter().map(|(_, s)| s.clone()).collect(),
    );
    d.blocking(move || {
        branches.iter().try_for_each(|b| {
            sessions
                .set_lineage(b, &lineage)
                .map_err(|e| internal(format!("recording a branch's lineage: {e}")))
        })
    })
    .await
}

/// The held source's files and globals, copied into each new session.
/// Branches whose workspaces are plain directories (no quota image) take
/// the host's disk: refused unless it holds them all, each copy bound by
/// its share of the room.
async fn copy_into(
    d: &Arc<Daemon>,
    (source, held): (&Arc<Session>, &Held),
    made: &[(SessionInfo, Arc<Session>)],
    keep: u64,
) -> Result<(), ErrorReply> {
    let dirs: Vec<_> = made.iter().map(|(_, b)| b.workspace.clone()).collect();
    let ws = source.workspace.clone();
    let shares = d
        .blocking(move || {
            let plain: Vec<bool> = dirs.iter().map(|w| !fsops::is_mount_point(w)).collect();
            let n = plain.iter().filter(|p| **p).count() as u64;
            let share = match dirs.iter().zip(&plain).find(|(_, p)| **p) {
                Some((dir, _)) => room_on_host(&ws, dir, keep, (n, "a fork"))?,
                None => CopyLimits::ANY,
            };
            Ok(plain
                .into_iter()
                .map(|p| if p { share } else { CopyLimits::ANY })
                .collect::<Vec<_>>())
        })
        .await?;
    let copies = made.iter().zip(shares).map(|((_, branch), limits)| {
        let (from, to, globals) = (source.clone(), branch.clone(), held.globals);
        d.blocking(move || copy_session(&from, &to, globals, limits).map_err(|e| copy_refused(&e)))
    });
    let copied = futures::future::join_all(copies).await;
    copied.into_iter().find_map(Result::err).map_or(Ok(()), Err)
}

/// The source's files, and its globals file as the branch's state file.
fn copy_session(
    from: &Session,
    to: &Session,
    globals: Option<&str>,
    limits: CopyLimits,
) -> Result<(), FsError> {
    let files = fsops::copy_tree(
        &from.workspace,
        &to.workspace,
        to.host_uid,
        &SAVED_GLOBALS,
        limits,
    )?;
    if let Some(g) = globals {
        fsops::copy_path(
            (&from.workspace, g),
            (&to.workspace, STATE_REL),
            to.host_uid,
            limits.less(&files),
        )?;
    }
    Ok(())
}

/// A copy that did not fit is refused as a quota error; others are ours.
fn copy_refused(e: &FsError) -> ErrorReply {
    match e {
        FsError::NoSpace(path) => ErrorReply {
            code: ErrorCode::Quota,
            message: format!(
                "a branch's disk quota cannot hold the session's files (at {path:?}); \
                 nothing was forked"
            ),
        },
        FsError::TooLarge { .. } | FsError::TooMany { .. } | FsError::TooManyInodes { .. } => {
            ErrorReply {
                code: ErrorCode::Quota,
                message: format!("the session's files cannot be copied: {e}; nothing was forked"),
            }
        }
        e => internal(format!("copying the session's files: {e}")),
    }
}

/// Lets the held source go, removing the globals file its agent wrote
/// for the branches (a stop's own file stays, for its next call).
async fn release(d: &Arc<Daemon>, source: &Arc<Session>, held: Held) {
    if held.globals == Some(BRANCH_REL) {
        let ws = source.workspace.clone();
        let _ = d
            .blocking(move || fsops::remove_path(&ws, BRANCH_REL).map_err(internal))
            .await;
    }
    drop(held);
}

/// Gives session `s` an interpreter of `profile` that restores the
/// globals in its state file: (restored, not restored).
async fn give(
    d: &Arc<Daemon>,
    policy: &Policy,
    s: &Arc<Session>,
    profile: &Profile,
    unsaved: Vec<Named>,
) -> Result<(Vec<String>, Vec<NotRestored>), ErrorReply> {
    let base = profile
        .requirements
        .as_ref()
        .map(|r| r.base.clone())
        .unwrap_or_default();
    let lease = d
        .envs
        .ensure(&base, &|_| {})
        .await
        .map_err(|e| e.to_reply())?;
    let ipython = IpythonLayer::get(policy, &d.envs, &|_| {}).await;
    let c = d
        .interpreters
        .give(policy, s, profile, (lease, ipython), unsaved)
        .await
        .map_err(|e| internal(format!("a branch's interpreter: {e}")))?;
    Ok((c.names, c.missed.into_iter().map(Into::into).collect()))
}

/// Closes sessions a failed fork made.
async fn close_all(d: &Arc<Daemon>, made: &[(SessionInfo, Arc<Session>)]) {
    for (info, s) in made {
        if let Err(e) = d.close(info.session_id.clone(), s.tenant.clone()).await {
            tracing::warn!(session = %s.name, error = %e.message, "could not close a failed fork's branch");
        }
    }
}

pub(super) async fn checkpoint(
    d: &Arc<Daemon>,
    (session_id, tenant): (String, Option<String>),
    label: Option<String>,
    ctx: Ctx,
) -> Result<Reply, ErrorReply> {
    if let Some(l) = &label {
        if l.chars().count() > checkpoints::MAX_LABEL_CHARS || l.chars().any(char::is_control) {
            return Err(bad_request(format!(
                "a label is at most {} characters, none of them control characters",
                checkpoints::MAX_LABEL_CHARS
            )));
        }
    }
    let policy = d.policy();
    if policy.branches.max_checkpoints == 0 {
        return Err(ErrorReply {
            code: ErrorCode::Forbidden,
            message: "checkpoints are off on this server (branches.max_checkpoints = 0)".into(),
        });
    }
    let s = d.session(session_id, tenant.clone()).await?;
    let turn = unless_cancelled(&ctx, s.run_lock.lock()).await?;
    let (store, name, owner, b) = (
        d.checkpoints.clone(),
        s.name.clone(),
        (tenant.clone(), s.lineage()),
        policy.branches.clone(),
    );
    let pending = d
        .blocking(move || store.begin(&name, (owner.0.as_deref(), &owner.1), &b))
        .await?;
    let started = Instant::now();
    let held = match d.interpreters.hold(&policy, &s, true).await {
        Ok(h) => h,
        Err(e) => {
            d.checkpoints.abort(pending);
            return Err(internal(e));
        }
    };
    let (ws, dir, globals) = (s.workspace.clone(), pending.dir.clone(), held.globals);
    let (room, bound_by) = (pending.room, pending.bound_by);
    let keep_free = policy.sessions.min_free_disk.0;
    let copied = d
        .blocking(move || {
            let host = room_on_host(&ws, &dir, keep_free, (1, "a checkpoint"))?;
            let (limits, by) = within((room, bound_by), host);
            save(&ws, &dir, globals, limits).map_err(|e| budget_refused(&e, by))
        })
        .await;
    let paused_ms = started.elapsed().as_millis() as u64;
    let not_saved = held.unsaved.iter().cloned().map(Into::into).collect();
    release(d, &s, held).await;
    drop(turn);
    let cost = match copied {
        Ok(c) => c,
        Err(e) => {
            d.checkpoints.abort(pending);
            return Err(e);
        }
    };
    let info = CheckpointInfo {
        checkpoint_id: pending.id.clone(),
        label,
        created: crate::audit::now_secs(),
        bytes: cost.disk_bytes,
        not_saved,
        paused_ms,
    };
    keep(d, pending, (info, cost.inodes), &policy).await
}

/// Keeps the checkpoint `p`, if its budgets still hold it.
async fn keep(
    d: &Arc<Daemon>,
    p: Pending,
    made: (CheckpointInfo, u64),
    policy: &Policy,
) -> Result<Reply, ErrorReply> {
    let (store, b) = (d.checkpoints.clone(), policy.branches.clone());
    let kept = d.blocking(move || store.commit(p, made, &b)).await?;
    Ok(Reply::Checkpoint(kept))
}

/// The held session's globals and files (workspace `ws`), copied into the
/// checkpoint directory `dir` within `limits`: what the checkpoint takes,
/// its own entries (its directory, `files/`, `meta.json`) included.
fn save(
    ws: &Path,
    dir: &Path,
    globals: Option<&str>,
    limits: CopyLimits,
) -> Result<Copied, FsError> {
    let block = fsops::block_size(dir);
    let mut cost = Copied {
        disk_bytes: checkpoints::OWN_ENTRIES * block,
        inodes: checkpoints::OWN_ENTRIES,
        ..Copied::default()
    };
    if cost.inodes > limits.max_inodes {
        return Err(FsError::TooManyInodes {
            path: ".".into(),
            max: limits.max_inodes,
        });
    }
    if cost.disk_bytes > limits.max_bytes {
        return Err(FsError::TooLarge {
            path: ".".into(),
            max: limits.max_bytes,
        });
    }
    if let Some(g) = globals {
        let to = (dir, checkpoints::GLOBALS);
        if let Some(c) = fsops::copy_path((ws, g), to, 0, limits.less(&cost))? {
            cost.add(&c);
        }
    }
    let files_dir = dir.join(checkpoints::FILES);
    let files = fsops::copy_tree(ws, &files_dir, 0, &[".prims"], limits.less(&cost))?;
    cost.add(&files);
    Ok(cost)
}

pub(super) async fn restore(
    d: &Arc<Daemon>,
    (session_id, tenant): (String, Option<String>),
    checkpoint_id: String,
    ctx: Ctx,
) -> Result<Reply, ErrorReply> {
    let s = d.session(session_id, tenant).await?;
    if !is_checkpoint_id(&checkpoint_id) {
        return Err(ErrorReply {
            code: ErrorCode::NotFound,
            message: format!("the session has no checkpoint {checkpoint_id:?}"),
        });
    }
    let (dir, info) = d.checkpoints.get(&s.name, &checkpoint_id)?;
    let _turn = unless_cancelled(&ctx, s.run_lock.lock()).await?;
    let started = Instant::now();
    let profile = d.interpreters.drop_interpreter(&s).await;
    let (ws, uid) = (s.workspace.clone(), s.host_uid);
    let keep_free = d.policy().sessions.min_free_disk.0;
    d.blocking(move || {
        put_back(&dir, &ws, uid, keep_free).map_err(|e| match e.code() {
            ErrorCode::Quota => ErrorReply {
                code: ErrorCode::Quota,
                message: format!("the workspace cannot hold the checkpoint's files: {e}"),
            },
            _ => internal(format!("rolling the files back: {e}")),
        })
    })
    .await?;
    let unsaved = info.not_saved.into_iter().map(Into::into).collect();
    let policy = d.policy();
    let (restored, not_restored) = give(d, &policy, &s, &profile, unsaved).await?;
    Ok(Reply::RolledBack(RestoreReply {
        restored,
        not_restored,
        duration_ms: started.elapsed().as_millis() as u64,
    }))
}

/// The files and globals of the checkpoint at `dir`, put back into the
/// emptied workspace `ws` as `uid`'s: bounded by the workspace's quota
/// image, or without one by the host's room beside `keep`.
fn put_back(dir: &Path, ws: &Path, uid: u32, keep: u64) -> Result<(), FsError> {
    fsops::clear_tree(ws, &[".prims"])?;
    fsops::remove_path(ws, STATE_REL)?;
    let limits = unless_image(ws, keep);
    let files = fsops::copy_tree(&dir.join(checkpoints::FILES), ws, uid, &[], limits)?;
    fsops::copy_path(
        (dir, checkpoints::GLOBALS),
        (ws, STATE_REL),
        uid,
        limits.less(&files),
    )?;
    Ok(())
}

pub(super) async fn list(
    d: &Arc<Daemon>,
    (session_id, tenant): (String, Option<String>),
) -> Result<Reply, ErrorReply> {
    let s = d.session(session_id, tenant).await?;
    Ok(Reply::Checkpoints {
        checkpoints: d.checkpoints.list(&s.name),
    })
}
