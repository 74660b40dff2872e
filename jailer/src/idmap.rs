//! The user namespace's id maps: jail uid/gid 1000 to one unprivileged host
//! id. Host root is never mapped.

use crate::error::JailError;
use crate::rootfs::JAIL_UID;
use nix::errno::Errno;

pub fn write(pid: libc::pid_t, host_uid: u32, host_gid: u32) -> Result<(), JailError> {
    let put = |file: &str, data: String| {
        std::fs::write(format!("/proc/{pid}/{file}"), data).map_err(|e| JailError::IdMap {
            file: file.to_string(),
            errno: Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
        })
    };
    put("setgroups", "deny".into())?;
    put("gid_map", format!("{JAIL_UID} {host_gid} 1\n"))?;
    put("uid_map", format!("{JAIL_UID} {host_uid} 1\n"))
}
