//! Ceilings on the jail's own user namespace (`/proc/sys/user`). The kernel
//! checks a jail's inotify use against these first, then against its
//! owner's (the host uid's) per-user budget at the host level, so one run
//! gets a modest share and never the whole budget of its uid.

use crate::error::JailError;
use nix::errno::Errno;
use std::io::Write;
use std::path::Path;

/// inotify instances and watches the jail may hold at once (the host's
/// default per user is 128 instances).
use prims_protocol::jail::{
    JAIL_INOTIFY_INSTANCES as INOTIFY_INSTANCES, JAIL_INOTIFY_WATCHES as INOTIFY_WATCHES,
};

/// Write the ceilings through `proc_dir`, a proc mount seen from inside the
/// jail's user namespace; needs `CAP_SYS_RESOURCE` there. A kernel without
/// inotify has no such files: nothing to limit then.
pub fn apply(proc_dir: &Path) -> Result<(), JailError> {
    for (name, value) in [
        ("max_inotify_instances", INOTIFY_INSTANCES),
        ("max_inotify_watches", INOTIFY_WATCHES),
    ] {
        let path = proc_dir.join("sys/user").join(name);
        let written = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|mut f| f.write_all(value.to_string().as_bytes()));
        match written {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(JailError::UserNsLimit {
                    path: format!("/proc/sys/user/{name}"),
                    errno: Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
                })
            }
        }
    }
    Ok(())
}
