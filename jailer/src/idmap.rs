//! The user namespace's id maps: jail uid/gid 1000 to one unprivileged host
//! id. Host root is never mapped. A fork template's namespace also maps the
//! host ids its children may take, so that each child's own namespace can
//! map its session's id (and nothing else) from there.

use crate::error::JailError;
use crate::plan::variant::ChildIds;
use crate::rootfs::JAIL_UID;
use nix::errno::Errno;
use prims_protocol::jail::TEMPLATE_CHILD_UIDS;

pub fn write(
    pid: libc::pid_t,
    host_uid: u32,
    host_gid: u32,
    children: Option<ChildIds>,
) -> Result<(), JailError> {
    let put = |file: &str, data: String| {
        std::fs::write(format!("/proc/{pid}/{file}"), data).map_err(|e| JailError::IdMap {
            file: file.to_string(),
            errno: Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
        })
    };
    put("setgroups", "deny".into())?;
    put("gid_map", map(host_gid, children))?;
    put("uid_map", map(host_uid, children))
}

/// The id inside the user namespace of `pid` that host id `host` maps
/// to, read from its `uid_map` or `gid_map` (`file`).
pub fn inside(pid: u32, file: &str, host: u32) -> Result<u32, JailError> {
    let text =
        std::fs::read_to_string(format!("/proc/{pid}/{file}")).map_err(|e| JailError::IdMap {
            file: file.to_string(),
            errno: Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
        })?;
    text.lines()
        .filter_map(|l| {
            let v: Vec<u64> = l
                .split_whitespace()
                .filter_map(|f| f.parse().ok())
                .collect();
            (v.len() == 3).then(|| (v[0], v[1], v[2]))
        })
        .find(|(_, out, n)| (*out..out + n).contains(&u64::from(host)))
        .and_then(|(ins, out, _)| u32::try_from(ins + (u64::from(host) - out)).ok())
        .ok_or(JailError::IdMap {
            file: file.to_string(),
            errno: Errno::ERANGE,
        })
}

/// Maps jail uid/gid 1000 of `pid`'s user namespace, a child of the user
/// namespace `parent`, to `uid` and `gid` as `parent` names them. The
/// kernel takes a map only from a process in the namespace's parent: a
/// helper joins `parent` to write it.
pub fn write_nested(
    pid: libc::pid_t,
    parent: &std::os::fd::OwnedFd,
    uid: u32,
    gid: u32,
) -> Result<(), JailError> {
    // SAFETY: the jailer is single-threaded, so fork is sound.
    match unsafe { nix::unistd::fork() }.map_err(JailError::Fork)? {
        nix::unistd::ForkResult::Child => {
            let code = match nix::sched::setns(parent, nix::sched::CloneFlags::CLONE_NEWUSER) {
                Err(e) => e as i32,
                Ok(()) => match write_files(pid, uid, gid) {
                    Ok(()) => 0,
                    Err(JailError::IdMap { errno, .. }) => errno as i32,
                    Err(_) => libc::EIO,
                },
            };
            // SAFETY: leaving a forked child without running destructors.
            unsafe { libc::_exit(code) }
        }
        nix::unistd::ForkResult::Parent { child } => match nix::sys::wait::waitpid(child, None) {
            Ok(nix::sys::wait::WaitStatus::Exited(_, 0)) => Ok(()),
            Ok(nix::sys::wait::WaitStatus::Exited(_, code)) => Err(JailError::IdMap {
                file: "uid_map of the template's child".into(),
                errno: Errno::from_raw(code),
            }),
            _ => Err(JailError::ChildLost),
        },
    }
}

fn write_files(pid: libc::pid_t, uid: u32, gid: u32) -> Result<(), JailError> {
    let put = |file: &str, data: String| {
        std::fs::write(format!("/proc/{pid}/{file}"), data).map_err(|e| JailError::IdMap {
            file: file.to_string(),
            errno: Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
        })
    };
    put("setgroups", "deny".into())?;
    put("gid_map", format!("{JAIL_UID} {gid} 1\n"))?;
    put("uid_map", format!("{JAIL_UID} {uid} 1\n"))
}

/// `JAIL_UID host 1`, then the children's range around `host` (which a
/// child never takes), at [`TEMPLATE_CHILD_UIDS`] and up. Host 0 is never
/// in it.
fn map(host: u32, children: Option<ChildIds>) -> String {
    let mut text = format!("{JAIL_UID} {host} 1\n");
    let Some(ChildIds { base, count }) = children else {
        return text;
    };
    let base = base.max(1);
    let end = base.saturating_add(count);
    let pieces = if (base..end).contains(&host) {
        [(base, host), (host + 1, end)]
    } else {
        [(base, end), (end, end)]
    };
    for (lo, hi) in pieces {
        if hi > lo {
            let inside = TEMPLATE_CHILD_UIDS + (lo - base);
            text.push_str(&format!("{inside} {lo} {}\n", hi - lo));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(base: u32, count: u32) -> ChildIds {
        ChildIds { base, count }
    }

    #[test]
    fn a_cold_jail_maps_one_id() {
        assert_eq!(map(200_005, None), "1000 200005 1\n");
    }

    #[test]
    fn a_template_maps_the_childrens_range_around_its_own_id() {
        assert_eq!(
            map(200_005, Some(ids(200_000, 100))),
            "1000 200005 1\n100000 200000 5\n100006 200006 94\n"
        );
        assert_eq!(
            map(300_000, Some(ids(200_000, 100))),
            "1000 300000 1\n100000 200000 100\n"
        );
        assert_eq!(
            map(5, Some(ids(0, 4))),
            "1000 5 1\n100000 1 4\n",
            "never host root"
        );
    }
}
