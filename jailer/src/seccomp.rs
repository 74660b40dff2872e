//! The seccomp filters python runs under, compiled from the rule set of
//! `plan::seccomp_rules` and stacked because each seccompiler filter has a
//! single match action:
//! 1. a guard that kills x32 and foreign-architecture calls;
//! 2. the ENOSYS rules (`clone3`);
//! 3. the EPERM rules.

use crate::error::JailError;
use crate::plan::seccomp_rules::{ArgCheck, Cmp, SeccompRules, When, Width};
use seccompiler::{
    sock_filter, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
    SeccompFilter, SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// The compiled filters, in the order they must be installed.
pub struct Filters(Vec<BpfProgram>);

fn seccomp_error(e: impl std::fmt::Display) -> JailError {
    JailError::Seccomp(format!("seccomp: {e}"))
}

fn condition(c: &ArgCheck) -> Result<SeccompCondition, JailError> {
    let len = match c.width {
        Width::Dword => SeccompCmpArgLen::Dword,
        Width::Qword => SeccompCmpArgLen::Qword,
    };
    let (op, val) = match c.cmp {
        Cmp::Eq(v) => (SeccompCmpOp::Eq, v),
        Cmp::Ne(v) => (SeccompCmpOp::Ne, v),
        Cmp::MaskedEq { mask, value } => (SeccompCmpOp::MaskedEq(mask), value),
    };
    SeccompCondition::new(c.arg, len, op, val).map_err(seccomp_error)
}

/// seccompiler's form: an empty rule list matches every call.
fn seccomp_rules(when: &When) -> Result<Vec<SeccompRule>, JailError> {
    match when {
        When::Always => Ok(vec![]),
        When::AnyOf(rules) => rules
            .iter()
            .map(|checks| {
                let conds = checks.iter().map(condition).collect::<Result<_, _>>()?;
                SeccompRule::new(conds).map_err(seccomp_error)
            })
            .collect(),
    }
}

fn compile(rules: &BTreeMap<i64, When>, action: SeccompAction) -> Result<BpfProgram, JailError> {
    let rules = rules
        .iter()
        .map(|(nr, when)| Ok((*nr, seccomp_rules(when)?)))
        .collect::<Result<BTreeMap<_, _>, JailError>>()?;
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, action, TargetArch::x86_64)
        .map_err(seccomp_error)?;
    BpfProgram::try_from(filter).map_err(seccomp_error)
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

/// Compile the rule set; nothing is installed yet.
pub fn build(rules: &SeccompRules) -> Result<Filters, JailError> {
    Ok(Filters(vec![
        guard(),
        compile(&rules.enosys, SeccompAction::Errno(libc::ENOSYS as u32))?,
        compile(&rules.eperm, SeccompAction::Errno(libc::EPERM as u32))?,
    ]))
}

impl Filters {
    /// Each program as the kernel reads it (`struct sock_filter`, native
    /// byte order), for a process that installs them itself.
    pub fn programs(&self) -> Vec<Vec<u8>> {
        self.0
            .iter()
            .map(|prog| {
                prog.iter()
                    .flat_map(|i| {
                        let mut b = Vec::with_capacity(8);
                        b.extend_from_slice(&i.code.to_ne_bytes());
                        b.push(i.jt);
                        b.push(i.jf);
                        b.extend_from_slice(&i.k.to_ne_bytes());
                        b
                    })
                    .collect()
            })
            .collect()
    }

    /// Install every filter on the calling thread. no_new_privs must be set.
    pub fn apply(&self) -> Result<(), JailError> {
        for prog in &self.0 {
            seccompiler::apply_filter(prog).map_err(seccomp_error)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::fixture::spec;
    use crate::plan::seccomp_rules::seccomp_rules;
    use prims_protocol::jail::JobSpec;

    #[test]
    fn the_rules_compile_into_three_filters_guard_first() {
        let filters = build(&seccomp_rules(&spec()).unwrap()).unwrap();
        assert_eq!(filters.0.len(), 3);
        assert_eq!(filters.0[0], guard());
        assert!(filters.0[1].len() < filters.0[2].len());
    }

    #[test]
    fn a_rule_set_denying_the_whole_table_compiles() {
        let s = JobSpec {
            seccomp_extra_deny: prims_syscalls::all().map(|(n, _)| n.to_string()).collect(),
            socket_families: vec![libc::AF_UNIX, libc::AF_INET, libc::AF_INET6],
            ..spec()
        };
        build(&seccomp_rules(&s).unwrap()).unwrap();
    }

    /// Runs a classic BPF program of loads, jumps and returns over a
    /// seccomp_data holding only `nr` and `arch`.
    fn eval(prog: &[sock_filter], nr: u32, arch: u32) -> u32 {
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let i = &prog[pc];
            let class = u32::from(i.code) & 0x07;
            let op = u32::from(i.code) & 0xf0;
            match class {
                libc::BPF_LD => acc = if i.k == 4 { arch } else { nr },
                libc::BPF_RET => return i.k,
                libc::BPF_JMP => {
                    let taken = match op {
                        libc::BPF_JEQ => acc == i.k,
                        libc::BPF_JGE => acc >= i.k,
                        _ => panic!("unexpected jump {op:#x}"),
                    };
                    pc += usize::from(if taken { i.jt } else { i.jf });
                }
                _ => panic!("unexpected instruction class {class:#x}"),
            }
            pc += 1;
        }
    }

    #[test]
    fn the_guard_kills_foreign_architectures_and_x32() {
        const AUDIT_ARCH_I386: u32 = 0x4000_0003;
        let g = guard();
        let kill = libc::SECCOMP_RET_KILL_PROCESS;
        assert_eq!(eval(&g, 39, AUDIT_ARCH_X86_64), libc::SECCOMP_RET_ALLOW);
        assert_eq!(eval(&g, 39, AUDIT_ARCH_I386), kill);
        assert_eq!(eval(&g, X32_SYSCALL_BIT | 39, AUDIT_ARCH_X86_64), kill);
        assert_eq!(
            eval(&g, X32_SYSCALL_BIT - 1, AUDIT_ARCH_X86_64),
            libc::SECCOMP_RET_ALLOW
        );
    }
}
