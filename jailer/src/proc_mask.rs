//! Files of a fresh `/proc` that still show the host to any reader: its
//! kernel command line and its boot id, which name the machine and tell
//! one boot of it from another. Each gets a read-only file of the jail's own
//! bound over it: an empty command line and a random boot id.

use crate::error::JailError;
use crate::mounts::{bind, set_attr, write_file, RO};
use crate::sys::MOUNT_ATTR_NOEXEC;
use nix::errno::Errno;
use std::path::Path;

/// Bind the jail's versions over `proc_dir`'s files. `root` is the new root
/// (still writable), where each replacement is made, bound and unlinked.
pub fn apply(root: &Path, proc_dir: &Path) -> Result<(), JailError> {
    let masks = [
        ("cmdline", String::new()),
        ("sys/kernel/random/boot_id", random_boot_id()?),
    ];
    let src = root.join(".proc-mask");
    for (name, content) in masks {
        let target = proc_dir.join(name);
        // Absent on this kernel: nothing to hide.
        if target.symlink_metadata().is_err() {
            continue;
        }
        write_file(&src, content.as_bytes())?;
        bind(&src.display().to_string(), &target, false)?;
        set_attr(&target, RO | MOUNT_ATTR_NOEXEC, false)?;
        // The mount keeps the file; its name has served.
        std::fs::remove_file(&src).map_err(|e| JailError::Remove {
            path: src.display().to_string(),
            errno: Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
        })?;
    }
    Ok(())
}

/// A version 4 UUID in the kernel's `boot_id` format.
fn random_boot_id() -> Result<String, JailError> {
    let mut b = [0u8; 16];
    // SAFETY: getrandom writes at most b.len() bytes into b.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n != b.len() as isize {
        return Err(JailError::Random(Errno::last()));
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    Ok(format!(
        "{}-{}-{}-{}-{}\n",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boot_id_is_a_fresh_v4_uuid() {
        let a = random_boot_id().unwrap();
        let b = random_boot_id().unwrap();
        assert_ne!(a, b);
        let fields: Vec<&str> = a.trim_end().split('-').collect();
        assert_eq!(
            fields.iter().map(|f| f.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(a.ends_with('\n'));
        assert!(fields[2].starts_with('4'), "{a}");
        assert!(
            matches!(fields[3].as_bytes()[0], b'8' | b'9' | b'a' | b'b'),
            "{a}"
        );
        assert!(a
            .trim_end()
            .bytes()
            .all(|c| c == b'-' || c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    }
}
