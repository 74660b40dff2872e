//! The kernel's Landlock ABI, asked with the one query call that needs no
//! ruleset. The jailer applies Landlock and the supervisor reports it for
//! live interpreters, so both ask here.

/// The Landlock ABI the running kernel reports (0 without Landlock).
pub fn landlock_abi() -> u32 {
    // SAFETY: LANDLOCK_CREATE_RULESET_VERSION with a null attr only queries.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32,
        )
    };
    u32::try_from(v).unwrap_or(0)
}
