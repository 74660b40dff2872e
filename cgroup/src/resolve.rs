//! Caller side, once: detect the mode and resolve (and create) the parent
//! cgroup directories that the jailer later receives as plain data.

use crate::error::CgroupError;
use crate::fs;
use crate::job::Version;
use crate::mountinfo::{
    components, own_v1_path, own_v2_path, parse_mountinfo, parse_proc_cgroup, v1_mounts, v2_mounts,
    MountInfo,
};
use crate::name::validate_name;
use crate::v1::V1_CONTROLLERS;
use crate::v2::UNIFIED;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

const SYS_FS_CGROUP: &str = "/sys/fs/cgroup";
const MOUNTINFO: &str = "/proc/self/mountinfo";
const PROC_CGROUP: &str = "/proc/self/cgroup";

/// Controllers a v2 job cgroup needs from its parent.
pub const V2_REQUIRED: [&str; 3] = ["memory", "pids", "cpu"];

/// Detect the cgroup mode from the filesystem type of `/sys/fs/cgroup`.
pub fn detect() -> Result<Version, CgroupError> {
    let magic =
        fs::fs_magic(Path::new(SYS_FS_CGROUP)).map_err(|source| CgroupError::Detect { source })?;
    version_from_magic(magic)
}

/// cgroup2 => V2; tmpfs (v1 or hybrid: the v1 hierarchies are mounted
/// below) => V1.
pub fn version_from_magic(magic: u64) -> Result<Version, CgroupError> {
    match magic {
        fs::CGROUP2_SUPER_MAGIC => Ok(Version::V2),
        fs::TMPFS_MAGIC => Ok(Version::V1),
        _ => Err(CgroupError::UnknownMode { magic }),
    }
}

/// A parsed `cgroup.parent` setting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParentPath {
    /// `/a/b`: from the hierarchy root.
    Absolute(Vec<String>),
    /// `a/b`: below the caller's own cgroup.
    Relative(Vec<String>),
}

impl ParentPath {
    /// Parse and check a parent setting: no `.`/`..`, no empty relative path.
    pub fn parse(parent: &str) -> Result<ParentPath, CgroupError> {
        let bad = |reason: &str| CgroupError::BadParent {
            parent: parent.to_string(),
            reason: reason.to_string(),
        };
        let comps = components(parent);
        for c in &comps {
            if c == "." || c == ".." {
                return Err(bad("\".\" and \"..\" are not allowed"));
            }
            if c.chars().any(|ch| ch.is_control()) {
                return Err(bad("control characters are not allowed"));
            }
        }
        if parent.starts_with('/') {
            Ok(ParentPath::Absolute(comps))
        } else if comps.is_empty() {
            Err(bad(
                "a relative parent must name a cgroup below the caller's own (e.g. \"prims\")",
            ))
        } else {
            Ok(ParentPath::Relative(comps))
        }
    }

    /// The absolute cgroup path (as components) for a caller in `own`.
    pub fn resolve(&self, own: &[String]) -> Vec<String> {
        match self {
            ParentPath::Absolute(c) => c.clone(),
            ParentPath::Relative(c) => own.iter().chain(c).cloned().collect(),
        }
    }
}

/// `comps` made relative to the mount's root, if it lies below it.
fn below_root(mount: &MountInfo, comps: &[String]) -> Option<Vec<String>> {
    let root = components(&mount.root);
    comps.strip_prefix(root.as_slice()).map(<[String]>::to_vec)
}

/// A cgroup located in a mount: the mount point and the path below it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Located {
    pub base: PathBuf,
    pub rel: Vec<String>,
}

impl Located {
    pub fn dir(&self) -> PathBuf {
        let mut d = self.base.clone();
        d.extend(&self.rel);
        d
    }
}

fn locate(
    candidates: &[&MountInfo],
    controller: &str,
    target: &[String],
) -> Result<Located, CgroupError> {
    for m in candidates {
        if let Some(rel) = below_root(m, target) {
            return Ok(Located {
                base: m.mount_point.clone(),
                rel,
            });
        }
    }
    Err(CgroupError::OutsideMount {
        controller: controller.to_string(),
        path: format!("/{}", target.join("/")),
        mount_root: candidates
            .first()
            .map(|m| m.root.clone())
            .unwrap_or_default(),
    })
}

/// Where each v1 controller's parent goes (pure).
pub(crate) fn plan_v1(
    mountinfo: &str,
    proc_cgroup: &str,
    parent: &str,
) -> Result<BTreeMap<String, Located>, CgroupError> {
    let parent = ParentPath::parse(parent)?;
    let mounts = parse_mountinfo(mountinfo);
    let entries = parse_proc_cgroup(proc_cgroup);
    let mut out = BTreeMap::new();
    for c in V1_CONTROLLERS {
        let candidates = v1_mounts(&mounts, c);
        if candidates.is_empty() {
            return Err(CgroupError::NoMount {
                controller: c.to_string(),
                kind: "v1".into(),
            });
        }
        let own = own_v1_path(&entries, c).ok_or_else(|| CgroupError::NoOwnCgroup {
            controller: c.to_string(),
        })?;
        let target = parent.resolve(&components(own));
        out.insert(c.to_string(), locate(&candidates, c, &target)?);
    }
    Ok(out)
}

/// Remembered by [`v2_move_self_to_leaf`]: the cgroup the process left
/// (its delegated cgroup) and the leaf it moved into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Delegation {
    pub root: Vec<String>,
    pub leaf: String,
}

static DELEGATION: Mutex<Option<Delegation>> = Mutex::new(None);

fn delegation() -> Option<Delegation> {
    match DELEGATION.lock() {
        Ok(g) => g.clone(),
        Err(p) => p.into_inner().clone(),
    }
}

/// The v2 parent plan (pure).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct V2Plan {
    /// The parent to create, in its mount.
    pub target: Located,
    /// The caller's own (delegated) cgroup, relative to the same mount:
    /// cgroup files are only ever written at or below it.
    pub boundary: Option<Vec<String>>,
    /// The caller's own cgroup path, for messages.
    pub own: String,
}

pub(crate) fn plan_v2(
    mountinfo: &str,
    proc_cgroup: &str,
    parent: &str,
    deleg: Option<&Delegation>,
) -> Result<V2Plan, CgroupError> {
    let parent = ParentPath::parse(parent)?;
    let mounts = parse_mountinfo(mountinfo);
    let candidates = v2_mounts(&mounts);
    if candidates.is_empty() {
        return Err(CgroupError::NoMount {
            controller: UNIFIED.into(),
            kind: "v2".into(),
        });
    }
    let entries = parse_proc_cgroup(proc_cgroup);
    let own = own_v2_path(&entries).ok_or_else(|| CgroupError::NoOwnCgroup {
        controller: "0:: (v2)".into(),
    })?;
    let mut base = components(own);
    // A daemon that moved itself into <delegated>/<leaf> still owns <delegated>.
    if let Some(d) = deleg {
        if base
            .split_last()
            .is_some_and(|(leaf, rest)| *leaf == d.leaf && rest == d.root.as_slice())
        {
            base = d.root.clone();
        }
    }
    let target = locate(&candidates, UNIFIED, &parent.resolve(&base))?;
    let boundary = candidates
        .iter()
        .find(|m| m.mount_point == target.base)
        .and_then(|m| below_root(m, &base));
    Ok(V2Plan {
        target,
        boundary,
        own: format!("/{}", base.join("/")),
    })
}

/// Create the v2 parent and make sure every cgroup from the mount root down
/// to it has `required` in `cgroup.subtree_control`, enabling them where
/// allowed (at or below the boundary). Directories made here are removed
/// again on failure.
pub(crate) fn prepare_v2(plan: &V2Plan, required: &[&str]) -> Result<PathBuf, CgroupError> {
    let mut created = Vec::new();
    let r = prepare_v2_inner(plan, required, &mut created);
    if r.is_err() {
        fs::undo_mkdirs(&created);
    }
    r
}

fn prepare_v2_inner(
    plan: &V2Plan,
    required: &[&str],
    created: &mut Vec<PathBuf>,
) -> Result<PathBuf, CgroupError> {
    let rel = &plan.target.rel;
    let mut dir = plan.target.base.clone();
    for k in 0..=rel.len() {
        if k > 0 {
            dir.push(&rel[k - 1]);
            match fs::mkdir(&dir) {
                Ok(()) => created.push(dir.clone()),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(source) => return Err(CgroupError::CreateDir { path: dir, source }),
            }
        }
        let writable = plan
            .boundary
            .as_ref()
            .is_some_and(|b| rel[..k].starts_with(b));
        ensure_enabled(&dir, writable, required, &plan.own)?;
    }
    Ok(dir)
}

const DELEGATE_HINT: &str = "run PRIMS as a systemd service with Delegate=yes (the supervisor moves itself \
     into a leaf), run `prims run` under `systemd-run --scope -p Delegate=yes`, or set cgroup.parent to a \
     cgroup delegated to PRIMS";

fn ensure_enabled(
    dir: &Path,
    writable: bool,
    required: &[&str],
    own: &str,
) -> Result<(), CgroupError> {
    let sc = dir.join("cgroup.subtree_control");
    let enabled = fs::read(&sc)?;
    let enabled: Vec<&str> = enabled.split_whitespace().collect();
    let missing: Vec<&str> = required
        .iter()
        .copied()
        .filter(|c| !enabled.contains(c))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let not_delegated = |hint: String| CgroupError::NotDelegated {
        path: dir.to_path_buf(),
        hint,
    };
    let list = missing.join(" ");
    if !writable {
        return Err(not_delegated(format!(
            "controllers [{list}] are not enabled in {}, which is outside this process's own cgroup {own}, \
             so PRIMS will not change it; {DELEGATE_HINT}",
            sc.display()
        )));
    }
    let unavailable_hint = |list: &str| {
        format!(
            "controllers [{list}] are not offered in {}: the parent cgroup does not delegate them \
             (on a hybrid host they belong to the v1 hierarchies: use the v1 backend); {DELEGATE_HINT}",
            dir.join("cgroup.controllers").display()
        )
    };
    let available = fs::read(&dir.join("cgroup.controllers"))?;
    let available: Vec<&str> = available.split_whitespace().collect();
    let unavailable: Vec<&str> = missing
        .iter()
        .copied()
        .filter(|c| !available.contains(c))
        .collect();
    if !unavailable.is_empty() {
        return Err(not_delegated(unavailable_hint(&unavailable.join(" "))));
    }
    let value = missing
        .iter()
        .map(|c| format!("+{c}"))
        .collect::<Vec<_>>()
        .join(" ");
    match fs::write_raw(&sc, &value) {
        Ok(()) => Ok(()),
        Err(e) => Err(match e.raw_os_error() {
            Some(libc::EBUSY) => not_delegated(format!(
                "writing {value:?} to {} failed with EBUSY: the cgroup holds processes of its own \
                 (the no-internal-processes rule); {DELEGATE_HINT}",
                sc.display()
            )),
            Some(libc::EACCES | libc::EPERM | libc::EROFS) => not_delegated(format!(
                "not permitted to write {} ({e}): the cgroup is not delegated to this user; {DELEGATE_HINT}",
                sc.display()
            )),
            Some(libc::ENOENT) => not_delegated(unavailable_hint(&list)),
            _ => CgroupError::WriteFile {
                path: sc,
                value,
                source: e,
            },
        }),
    }
}

/// Resolve the parent cgroup directories for `parent` and create them.
///
/// `parent` is relative to the caller's own cgroup (per controller, as read
/// from `/proc/self/cgroup`; after [`v2_move_self_to_leaf`], relative to the
/// cgroup the process left) or absolute from the hierarchy root. v1 returns
/// the keys `memory`, `pids`, `cpu`, `cpuacct` (cpu and cpuacct share a
/// directory when co-mounted); v2 returns `unified`.
pub fn resolve_parents(
    version: Version,
    parent: &str,
) -> Result<BTreeMap<String, PathBuf>, CgroupError> {
    let mountinfo = fs::read(Path::new(MOUNTINFO))?;
    let proc_cgroup = fs::read(Path::new(PROC_CGROUP))?;
    match version {
        Version::V1 => {
            let plan = plan_v1(&mountinfo, &proc_cgroup, parent)?;
            let mut made: Vec<PathBuf> = Vec::new();
            for loc in plan.values() {
                match fs::mkdir_chain(&loc.base, &loc.rel) {
                    Ok(m) => made.extend(m),
                    Err(e) => {
                        fs::undo_mkdirs(&made);
                        return Err(e);
                    }
                }
            }
            Ok(plan.into_iter().map(|(k, loc)| (k, loc.dir())).collect())
        }
        Version::V2 => {
            let plan = plan_v2(&mountinfo, &proc_cgroup, parent, delegation().as_ref())?;
            let dir = prepare_v2(&plan, &V2_REQUIRED)?;
            Ok(BTreeMap::from([(UNIFIED.to_string(), dir)]))
        }
    }
}

/// Move `pid` into `<own_dir>/<leaf>`, creating the leaf if needed.
pub(crate) fn move_pid_to_leaf(
    own_dir: &Path,
    leaf: &str,
    pid: libc::pid_t,
) -> Result<PathBuf, CgroupError> {
    validate_name(leaf)?;
    let dir = own_dir.join(leaf);
    match fs::mkdir(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(source) => return Err(CgroupError::CreateDir { path: dir, source }),
    }
    let procs = dir.join("cgroup.procs");
    let value = pid.to_string();
    match fs::write_raw(&procs, &value) {
        Ok(()) => Ok(dir),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) => {
            Err(CgroupError::NotDelegated {
                path: own_dir.to_path_buf(),
                hint: format!("cannot move into {} ({e}): {DELEGATE_HINT}", dir.display()),
            })
        }
        Err(source) => Err(CgroupError::WriteFile {
            path: procs,
            value,
            source,
        }),
    }
}

/// v2, for a daemon started with `Delegate=yes`: move the calling process
/// into `<own>/<leaf>`, so that its own cgroup holds no process and can
/// enable controllers for its children. Later [`resolve_parents`] calls in
/// this process resolve relative parents against the cgroup it left, and
/// may write its `cgroup.subtree_control`. Calling it again is a no-op.
pub fn v2_move_self_to_leaf(leaf: &str) -> Result<(), CgroupError> {
    validate_name(leaf)?;
    let mountinfo = fs::read(Path::new(MOUNTINFO))?;
    let proc_cgroup = fs::read(Path::new(PROC_CGROUP))?;
    let entries = parse_proc_cgroup(&proc_cgroup);
    let own = own_v2_path(&entries).ok_or_else(|| CgroupError::NoOwnCgroup {
        controller: "0:: (v2)".into(),
    })?;
    let own = components(own);
    let mut guard = match DELEGATION.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    };
    if let Some(d) = guard.as_ref() {
        if own
            .split_last()
            .is_some_and(|(l, rest)| *l == d.leaf && rest == d.root.as_slice())
        {
            return Ok(());
        }
    }
    let mounts = parse_mountinfo(&mountinfo);
    let candidates = v2_mounts(&mounts);
    if candidates.is_empty() {
        return Err(CgroupError::NoMount {
            controller: UNIFIED.into(),
            kind: "v2".into(),
        });
    }
    let own_dir = locate(&candidates, UNIFIED, &own)?.dir();
    let pid = libc::pid_t::try_from(std::process::id()).map_err(|_| CgroupError::Parse {
        path: PathBuf::from("/proc/self"),
        what: "own pid does not fit pid_t".into(),
    })?;
    move_pid_to_leaf(&own_dir, leaf, pid)?;
    *guard = Some(Delegation {
        root: own,
        leaf: leaf.to_string(),
    });
    Ok(())
}

#[cfg(test)]
mod tests;
