//! The seccomp rule set for a spec, as data: which syscall numbers get
//! ENOSYS or EPERM, always or when their arguments match. `seccomp` compiles
//! it with seccompiler and installs it.
//!
//! - `clone3` returns ENOSYS, so libc falls back to `clone`, whose flags
//!   BPF can read (`clone3` passes them in memory).
//! - EPERM for the calls the jail always refuses, for the spec's
//!   `seccomp_extra_deny`, and for argument patterns:
//!   - `clone` with any `CLONE_NEW*` flag;
//!   - `ioctl` TIOCSTI and TIOCLINUX, which push input into a terminal;
//!   - `socket` outside the spec's families (every `socket` with none), and
//!     an IPv4 or IPv6 socket that is not plain TCP or UDP (raw, packet
//!     and SCTP-like types, other protocols such as ICMP);
//!   - `personality` other than 0 or a query (0xffffffff);
//!   - `prlimit64` on any process but the caller (pid 0): glibc's
//!     getrlimit and setrlimit pass 0, and the jail's init, the only other
//!     process python could mean, must stay out of its reach.
//!
//!   A call denied by name is denied outright: an `extra_deny` entry beats
//!   an argument pattern for the same call.
//! - A fork template's filter leaves `unshare`, `setns` and the policy's
//!   own denials to its children (`variant`).

use super::variant::{SeccompScope, Variant};
use crate::error::JailError;
use prims_protocol::jail::JobSpec;
use std::collections::BTreeMap;

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
/// The `type` argument of an IP socket may be TCP's or UDP's, with or
/// without `SOCK_NONBLOCK` and `SOCK_CLOEXEC`: every other value is
/// refused, so an unknown flag cannot carry a raw type past the filter.
const IP_SOCKET_TYPES: [u64; 8] = {
    let (stream, dgram) = (libc::SOCK_STREAM as u64, libc::SOCK_DGRAM as u64);
    let (nb, ce) = (libc::SOCK_NONBLOCK as u64, libc::SOCK_CLOEXEC as u64);
    [
        stream,
        stream | nb,
        stream | ce,
        stream | nb | ce,
        dgram,
        dgram | nb,
        dgram | ce,
        dgram | nb | ce,
    ]
};
/// An IP socket's protocol: the type's default, TCP or UDP.
const IP_PROTOCOLS: [u64; 3] = [0, libc::IPPROTO_TCP as u64, libc::IPPROTO_UDP as u64];
/// `personality(0xffffffff)` only reads the current persona.
const PERSONALITY_QUERY: u64 = 0xffff_ffff;

/// How much of an argument the filter reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Width {
    /// The low 32 bits: what the kernel reads of an `int`.
    Dword,
    Qword,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    Eq(u64),
    Ne(u64),
    /// `arg & mask == value`.
    MaskedEq {
        mask: u64,
        value: u64,
    },
}

/// One comparison on argument `arg` (0-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArgCheck {
    pub arg: u8,
    pub width: Width,
    pub cmp: Cmp,
}

/// When a listed call gets its action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum When {
    Always,
    /// When every check of any one rule holds.
    AnyOf(Vec<Vec<ArgCheck>>),
}

/// Syscall numbers to their condition, one map per action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeccompRules {
    pub enosys: BTreeMap<i64, When>,
    pub eperm: BTreeMap<i64, When>,
}

fn nr(name: &str) -> Result<i64, JailError> {
    prims_syscalls::number(name)
        .ok_or_else(|| JailError::Seccomp(format!("seccomp: unknown syscall {name:?}")))
}

fn check(arg: u8, width: Width, cmp: Cmp) -> ArgCheck {
    ArgCheck { arg, width, cmp }
}

/// Deny `nr` when `when` holds, unless it is denied outright already.
fn deny_when(eperm: &mut BTreeMap<i64, When>, nr: i64, when: When) {
    eperm.entry(nr).or_insert(when);
}

pub fn seccomp_rules(spec: &JobSpec) -> Result<SeccompRules, JailError> {
    let mut eperm = BTreeMap::new();
    let under_children = Variant::of(spec).seccomp == SeccompScope::UnderChildren;
    for name in prims_syscalls::ALWAYS_DENIED
        .iter()
        .copied()
        .filter(|n| !(under_children && matches!(*n, "unshare" | "setns")))
        .chain(
            spec.seccomp_extra_deny
                .iter()
                .filter(|_| !under_children)
                .map(String::as_str),
        )
    {
        eperm.insert(nr(name)?, When::Always);
    }
    let clone_new = CLONE_NEW_FLAGS
        .iter()
        .map(|&flag| {
            let cmp = Cmp::MaskedEq {
                mask: flag,
                value: flag,
            };
            vec![check(0, Width::Qword, cmp)]
        })
        .collect();
    deny_when(&mut eperm, nr("clone")?, When::AnyOf(clone_new));
    // Compared as 32 bits: the kernel ignores the upper half of the request.
    let terminal_input = [TIOCSTI, TIOCLINUX]
        .iter()
        .map(|&req| vec![check(1, Width::Dword, Cmp::Eq(req))])
        .collect();
    deny_when(&mut eperm, nr("ioctl")?, When::AnyOf(terminal_input));
    deny_when(
        &mut eperm,
        nr("socket")?,
        socket_rule(&spec.socket_families),
    );
    let set_persona = vec![vec![
        check(0, Width::Dword, Cmp::Ne(0)),
        check(0, Width::Dword, Cmp::Ne(PERSONALITY_QUERY)),
    ]];
    deny_when(&mut eperm, nr("personality")?, When::AnyOf(set_persona));
    // The pid is an int: compared as 32 bits, as the kernel reads it.
    let other_process = vec![vec![check(0, Width::Dword, Cmp::Ne(0))]];
    deny_when(&mut eperm, nr("prlimit64")?, When::AnyOf(other_process));
    let enosys = BTreeMap::from([(nr("clone3")?, When::Always)]);
    Ok(SeccompRules { enosys, eperm })
}

/// `socket` is refused outside `families`, and for an IPv4 or IPv6 socket
/// of another type or protocol than TCP's and UDP's.
fn socket_rule(families: &[i32]) -> When {
    let family = |cmp| check(0, Width::Dword, cmp);
    let outside: Vec<ArgCheck> = families
        .iter()
        .map(|&f| family(Cmp::Ne(f as u64)))
        .collect();
    if outside.is_empty() {
        return When::Always;
    }
    let mut rules = vec![outside];
    for ip in [libc::AF_INET, libc::AF_INET6] {
        if !families.contains(&ip) {
            continue;
        }
        let ip = family(Cmp::Eq(ip as u64));
        let not_any = |arg, values: &[u64]| {
            std::iter::once(ip)
                .chain(values.iter().map(|&v| check(arg, Width::Dword, Cmp::Ne(v))))
                .collect()
        };
        rules.push(not_any(1, &IP_SOCKET_TYPES));
        rules.push(not_any(2, &IP_PROTOCOLS));
    }
    When::AnyOf(rules)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::fixture::spec;

    fn number(name: &str) -> i64 {
        prims_syscalls::number(name).unwrap()
    }

    fn rules_with(extra_deny: &[&str], socket_families: &[i32]) -> SeccompRules {
        seccomp_rules(&JobSpec {
            seccomp_extra_deny: extra_deny.iter().map(|s| s.to_string()).collect(),
            socket_families: socket_families.to_vec(),
            ..spec()
        })
        .unwrap()
    }

    fn eperm<'a>(r: &'a SeccompRules, name: &str) -> Option<&'a When> {
        r.eperm.get(&number(name))
    }

    #[test]
    fn every_always_denied_call_is_denied_outright() {
        let r = rules_with(&[], &[]);
        for n in prims_syscalls::ALWAYS_DENIED {
            assert_eq!(eperm(&r, n), Some(&When::Always), "{n}");
        }
    }

    #[test]
    fn only_the_listed_calls_are_touched() {
        let r = rules_with(&[], &[libc::AF_UNIX]);
        let filtered = ["clone", "ioctl", "socket", "personality", "prlimit64"];
        assert_eq!(
            r.eperm.len(),
            prims_syscalls::ALWAYS_DENIED.len() + filtered.len()
        );
        for n in filtered {
            assert!(matches!(eperm(&r, n), Some(When::AnyOf(_))), "{n}");
        }
        for n in ["read", "write", "openat", "execve", "getpid", "mmap"] {
            assert_eq!(eperm(&r, n), None, "{n}");
        }
    }

    #[test]
    fn clone3_gets_enosys_and_nothing_else_does() {
        let r = rules_with(&[], &[]);
        assert_eq!(r.enosys, BTreeMap::from([(number("clone3"), When::Always)]));
        assert_eq!(eperm(&r, "clone3"), None);
    }

    #[test]
    fn clone_is_denied_with_any_new_namespace_flag() {
        let r = rules_with(&[], &[]);
        let Some(When::AnyOf(rules)) = eperm(&r, "clone") else {
            panic!("clone is not filtered by argument");
        };
        let flags: Vec<u64> = rules
            .iter()
            .map(|rule| match rule.as_slice() {
                [ArgCheck {
                    arg: 0,
                    width: Width::Qword,
                    cmp: Cmp::MaskedEq { mask, value },
                }] if mask == value => *mask,
                other => panic!("unexpected clone rule {other:?}"),
            })
            .collect();
        let all = flags.iter().fold(0, |acc, f| acc | f);
        assert_eq!(flags.len(), 7);
        assert_eq!(
            all, 0x7E02_0000,
            "CLONE_NEW{{NS,CGROUP,UTS,IPC,USER,PID,NET}}"
        );
    }

    #[test]
    fn ioctl_is_denied_for_terminal_input_compared_as_32_bits() {
        let r = rules_with(&[], &[]);
        let dword_eq = |v| vec![check(1, Width::Dword, Cmp::Eq(v))];
        assert_eq!(
            eperm(&r, "ioctl"),
            Some(&When::AnyOf(vec![dword_eq(0x5412), dword_eq(0x541C)]))
        );
    }

    #[test]
    fn socket_is_denied_outside_the_families() {
        let r = rules_with(&[], &[libc::AF_UNIX]);
        let ne = |f: i32| check(0, Width::Dword, Cmp::Ne(f as u64));
        assert_eq!(eperm(&r, "socket"), Some(&When::AnyOf(vec![vec![ne(1)]])));
    }

    #[test]
    fn ip_sockets_are_tcp_and_udp_only() {
        let r = rules_with(&[], &[libc::AF_UNIX, libc::AF_INET, libc::AF_INET6]);
        let Some(When::AnyOf(rules)) = eperm(&r, "socket") else {
            panic!("socket is not filtered by argument");
        };
        let ne = |arg, v: u64| check(arg, Width::Dword, Cmp::Ne(v));
        assert_eq!(rules[0], [ne(0, 1), ne(0, 2), ne(0, 10)]);
        assert_eq!(rules.len(), 5);
        for (i, family) in [(1, 2u64), (3, 10)] {
            let is = check(0, Width::Dword, Cmp::Eq(family));
            // SOCK_STREAM and SOCK_DGRAM, each with SOCK_NONBLOCK (0x800)
            // and SOCK_CLOEXEC (0x80000) or not: nothing else.
            let types = [1, 0x801, 0x80001, 0x80801, 2, 0x802, 0x80002, 0x80802];
            let mut want = vec![is];
            want.extend(types.map(|t| ne(1, t)));
            assert_eq!(rules[i], want);
            // The type's default, IPPROTO_TCP or IPPROTO_UDP.
            assert_eq!(rules[i + 1], [is, ne(2, 0), ne(2, 6), ne(2, 17)]);
        }
    }

    #[test]
    fn socket_without_families_is_denied_outright() {
        let r = rules_with(&[], &[]);
        assert_eq!(eperm(&r, "socket"), Some(&When::Always));
    }

    #[test]
    fn personality_may_only_be_read_or_reset() {
        let r = rules_with(&[], &[]);
        assert_eq!(
            eperm(&r, "personality"),
            Some(&When::AnyOf(vec![vec![
                check(0, Width::Dword, Cmp::Ne(0)),
                check(0, Width::Dword, Cmp::Ne(0xffff_ffff)),
            ]]))
        );
    }

    #[test]
    fn prlimit64_is_denied_on_any_pid_but_the_caller() {
        let r = rules_with(&[], &[]);
        assert_eq!(
            eperm(&r, "prlimit64"),
            Some(&When::AnyOf(vec![vec![check(0, Width::Dword, Cmp::Ne(0))]]))
        );
    }

    #[test]
    fn extra_deny_adds_calls_outright() {
        let base = rules_with(&[], &[]);
        let r = rules_with(&["getpid", "sched_setaffinity"], &[]);
        assert_eq!(eperm(&r, "getpid"), Some(&When::Always));
        assert_eq!(eperm(&r, "sched_setaffinity"), Some(&When::Always));
        assert_eq!(r.eperm.len(), base.eperm.len() + 2);
        assert_eq!(r.enosys, base.enosys);
    }

    #[test]
    fn extra_deny_beats_an_argument_filter() {
        let r = rules_with(&["prlimit64", "clone", "ioctl", "personality"], &[1]);
        for n in ["prlimit64", "clone", "ioctl", "personality"] {
            assert_eq!(eperm(&r, n), Some(&When::Always), "{n}");
        }
        let r = rules_with(&["socket"], &[libc::AF_INET]);
        assert_eq!(eperm(&r, "socket"), Some(&When::Always));
    }

    #[test]
    fn extra_deny_repeating_the_list_changes_nothing() {
        let base = rules_with(&[], &[1]);
        let r = rules_with(&["ptrace", "mount", "ptrace"], &[1]);
        assert_eq!(r, base);
    }

    #[test]
    fn extra_deny_may_name_clone3_as_well() {
        let r = rules_with(&["clone3"], &[]);
        assert_eq!(eperm(&r, "clone3"), Some(&When::Always));
        assert_eq!(r.enosys.get(&number("clone3")), Some(&When::Always));
    }

    #[test]
    fn every_name_in_the_table_can_be_denied() {
        let names: Vec<&str> = prims_syscalls::all().map(|(n, _)| n).collect();
        let r = rules_with(&names, &[]);
        for (n, nr) in prims_syscalls::all() {
            assert_eq!(r.eperm.get(&nr), Some(&When::Always), "{n}");
        }
        assert_eq!(r.eperm.len(), names.len());
    }

    #[test]
    fn unknown_names_are_refused() {
        for bad in ["not_a_syscall", "SYS_mount", "", "Mount"] {
            let e = seccomp_rules(&JobSpec {
                seccomp_extra_deny: vec!["getpid".into(), bad.into()],
                ..spec()
            })
            .unwrap_err();
            assert!(
                matches!(&e, JailError::Seccomp(m) if *m == format!("seccomp: unknown syscall {bad:?}")),
                "{e:?}"
            );
            assert_eq!(e.step(), "seccomp");
        }
    }
}
