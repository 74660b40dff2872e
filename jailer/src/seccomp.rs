//! The seccomp filters python runs under, stacked because each seccompiler
//! filter has a single match action:
//! 1. a guard that kills x32 and foreign-architecture calls;
//! 2. `clone3` returns ENOSYS, so libc falls back to `clone`, whose flags
//!    BPF can read;
//! 3. a deny list and argument filters returning EPERM.
//!
//! `prlimit64` on any process but the caller (pid 0) is refused as well:
//! glibc's getrlimit and setrlimit pass 0, and the jail's init, the only
//! other process python could mean, must stay out of its reach.

use crate::error::JailError;
use prims_policy::syscalls;
use seccompiler::{
    sock_filter, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
    SeccompFilter, SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

const DENY: &[&str] = &[
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
    // memory policy
    "mbind",
    "set_mempolicy",
    "migrate_pages",
    "move_pages",
];

const CLONE_NEW_FLAGS: [u64; 7] = [
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWCGROUP as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
];
const TIOCSTI: u64 = 0x5412;
const TIOCLINUX: u64 = 0x541C;
const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// The compiled filters, in the order they must be installed.
pub struct Filters(Vec<BpfProgram>);

fn nr(name: &str) -> Result<i64, JailError> {
    syscalls::number(name)
        .ok_or_else(|| JailError::Seccomp(format!("seccomp: unknown syscall {name:?}")))
}

fn cond(
    arg: u8,
    len: SeccompCmpArgLen,
    op: SeccompCmpOp,
    val: u64,
) -> Result<SeccompCondition, JailError> {
    SeccompCondition::new(arg, len, op, val)
        .map_err(|e| JailError::Seccomp(format!("seccomp: {e}")))
}

fn rule(conds: Vec<SeccompCondition>) -> Result<SeccompRule, JailError> {
    SeccompRule::new(conds).map_err(|e| JailError::Seccomp(format!("seccomp: {e}")))
}

fn compile(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    action: SeccompAction,
) -> Result<BpfProgram, JailError> {
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, action, TargetArch::x86_64)
        .map_err(|e| JailError::Seccomp(format!("seccomp: {e}")))?;
    filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| JailError::Seccomp(format!("seccomp: {e}")))
}

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

/// seccompiler has no x32 check: kill any call with the x32 bit set, and any
/// call made through another architecture's entry point (`int 0x80`).
fn guard() -> BpfProgram {
    const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const JGE_K: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
    const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    vec![
        stmt(LD_W_ABS, 4), // seccomp_data.arch
        sock_filter {
            code: JEQ_K,
            jt: 1,
            jf: 0,
            k: AUDIT_ARCH_X86_64,
        },
        stmt(RET_K, libc::SECCOMP_RET_KILL_PROCESS),
        stmt(LD_W_ABS, 0), // seccomp_data.nr
        sock_filter {
            code: JGE_K,
            jt: 0,
            jf: 1,
            k: X32_SYSCALL_BIT,
        },
        stmt(RET_K, libc::SECCOMP_RET_KILL_PROCESS),
        stmt(RET_K, libc::SECCOMP_RET_ALLOW),
    ]
}

/// Deny `nr` when `rules` match, unless it is denied outright already
/// (policy's `extra_deny` may name any call).
fn deny_when(eperm: &mut BTreeMap<i64, Vec<SeccompRule>>, nr: i64, rules: Vec<SeccompRule>) {
    eperm.entry(nr).or_insert(rules);
}

pub fn build(extra_deny: &[String], socket_families: &[i32]) -> Result<Filters, JailError> {
    let mut eperm: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for name in DENY
        .iter()
        .copied()
        .chain(extra_deny.iter().map(String::as_str))
    {
        eperm.insert(nr(name)?, vec![]);
    }
    let mut clone_rules = Vec::new();
    for flag in CLONE_NEW_FLAGS {
        clone_rules.push(rule(vec![cond(
            0,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(flag),
            flag,
        )?])?);
    }
    deny_when(&mut eperm, nr("clone")?, clone_rules);
    let mut ioctl_rules = Vec::new();
    for req in [TIOCSTI, TIOCLINUX] {
        // Compared as 32 bits: the kernel ignores the upper half of the request.
        ioctl_rules.push(rule(vec![cond(
            1,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Eq,
            req,
        )?])?);
    }
    deny_when(&mut eperm, nr("ioctl")?, ioctl_rules);
    let mut not_allowed = Vec::new();
    for fam in socket_families {
        not_allowed.push(cond(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Ne,
            *fam as u64,
        )?);
    }
    let socket_rule = if not_allowed.is_empty() {
        vec![]
    } else {
        vec![rule(not_allowed)?]
    };
    deny_when(&mut eperm, nr("socket")?, socket_rule);
    deny_when(
        &mut eperm,
        nr("personality")?,
        vec![rule(vec![
            cond(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, 0)?,
            cond(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, 0xffff_ffff)?,
        ])?],
    );
    // The pid is an int: compared as 32 bits, as the kernel reads it.
    deny_when(
        &mut eperm,
        nr("prlimit64")?,
        vec![rule(vec![cond(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Ne,
            0,
        )?])?],
    );
    let mut enosys = BTreeMap::new();
    enosys.insert(nr("clone3")?, vec![]);
    Ok(Filters(vec![
        guard(),
        compile(enosys, SeccompAction::Errno(libc::ENOSYS as u32))?,
        compile(eperm, SeccompAction::Errno(libc::EPERM as u32))?,
    ]))
}

impl Filters {
    /// Install every filter on the calling thread. no_new_privs must be set.
    pub fn apply(&self) -> Result<(), JailError> {
        for prog in &self.0 {
            seccompiler::apply_filter(prog)
                .map_err(|e| JailError::Seccomp(format!("seccomp: {e}")))?;
        }
        Ok(())
    }
}
