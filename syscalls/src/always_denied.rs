//! The calls the jail refuses with EPERM for every job, whatever the policy
//! says: each one reaches past the jail (namespaces, mounts, other
//! processes, the kernel, the host's clocks and limits) and python has no
//! use for it. Policy's `seccomp.extra_deny` can only add to this list.
//!
//! Calls the jail filters by argument instead (`clone`, `ioctl`, `socket`,
//! `personality`, `prlimit64`) and `clone3` (ENOSYS) are the jailer's own
//! rules, not part of this list.

/// Every name here is in the syscall table; see the tests.
pub const ALWAYS_DENIED: &[&str] = &[
    // namespaces and mounts
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    // process access
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    // kernel interfaces
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    // asynchronous I/O: every context counts against one host-wide limit
    // (fs.aio-max-nr), which a jail could fill for everyone
    "io_setup",
    "io_destroy",
    "io_submit",
    "io_cancel",
    "io_getevents",
    "io_pgetevents",
    // secret memory: pages taken out of the kernel's direct map, which
    // splits it for the whole host; python has no use for them
    "memfd_secret",
    // keys
    "keyctl",
    "add_key",
    "request_key",
    // kexec and modules
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    // system administration
    "reboot",
    "swapon",
    "swapoff",
    "syslog",
    "acct",
    "quotactl",
    "quotactl_fd",
    // clocks and names
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "sethostname",
    "setdomainname",
    // low-level hardware
    "iopl",
    "ioperm",
    "modify_ldt",
    // obsolete calls
    "lookup_dcookie",
    "vhangup",
    "uselib",
    "ustat",
    "sysfs",
    // file handles
    "name_to_handle_at",
    "open_by_handle_at",
    // notification
    "fanotify_init",
    // POSIX message queues: a queue's bytes count against its maker's
    // per-user budget on every level of the user-namespace chain, and the
    // jail's Landlock domain refuses it the queue it made (no rule covers
    // the queue's path): making one only spends that budget
    "mq_open",
    "mq_unlink",
    // memory policy
    "mbind",
    "set_mempolicy",
    "migrate_pages",
    "move_pages",
];

#[cfg(all(test, target_os = "linux", target_arch = "x86_64"))]
mod tests {
    use super::*;
    use crate::table::{is_known, number};
    use std::collections::HashSet;

    #[test]
    fn every_name_is_in_the_table() {
        for n in ALWAYS_DENIED {
            assert!(is_known(n), "{n} is not an x86_64 syscall name");
        }
    }

    #[test]
    fn no_name_or_number_twice() {
        let mut names = HashSet::new();
        let mut nrs = HashSet::new();
        for n in ALWAYS_DENIED {
            assert!(names.insert(*n), "{n} is listed twice");
            assert!(nrs.insert(number(n)), "{n} repeats a number");
        }
    }

    #[test]
    fn argument_filtered_calls_stay_off_the_list() {
        // Denying these outright would break python: the jailer filters them
        // by argument instead.
        for n in [
            "clone",
            "clone3",
            "ioctl",
            "socket",
            "personality",
            "prlimit64",
        ] {
            assert!(!ALWAYS_DENIED.contains(&n), "{n}");
        }
    }
}
