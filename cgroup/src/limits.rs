//! Limits and usage figures, and the exact strings written to the v1 and v2
//! limit files (pure, so the arithmetic is tested without a kernel).

use crate::error::CgroupError;

/// CFS period used for the CPU bandwidth limit, in microseconds.
pub const CPU_PERIOD_US: u64 = 100_000;

/// Resource limits of one job. `u64::MAX` in any field means "no limit".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Memory limit in bytes (page cache included). Must be > 0.
    pub memory_bytes: u64,
    /// Swap the job may use on top of `memory_bytes`. 0 = no swap.
    pub swap_bytes: u64,
    /// Maximum number of tasks (processes and threads). Must be > 0.
    pub pids: u64,
    /// CPU bandwidth in thousandths of a core (1000 = one core). At least 10:
    /// the kernel's smallest quota is 1 ms per 100 ms period.
    pub cpu_millis: u64,
}

impl Limits {
    /// No limit at all.
    pub const UNLIMITED: Limits = Limits {
        memory_bytes: u64::MAX,
        swap_bytes: u64::MAX,
        pids: u64::MAX,
        cpu_millis: u64::MAX,
    };

    /// Refuse values the kernel would reject or that would make the job
    /// unable to start.
    pub fn validate(&self) -> Result<(), CgroupError> {
        let bad = |field, value, reason| {
            Err(CgroupError::BadLimit {
                field,
                value,
                reason,
            })
        };
        if self.memory_bytes == 0 {
            return bad("memory_bytes", 0, "must be > 0 (u64::MAX means no limit)");
        }
        if self.pids == 0 {
            return bad("pids", 0, "must be > 0 (u64::MAX means no limit)");
        }
        if self.cpu_millis < 10 {
            return bad(
                "cpu_millis",
                self.cpu_millis,
                "below 10, the kernel's minimum of 1 ms quota per 100 ms period",
            );
        }
        if self.cpu_millis != u64::MAX
            && self.cpu_millis.checked_mul(CPU_PERIOD_US / 1000).is_none()
        {
            return bad("cpu_millis", self.cpu_millis, "too large");
        }
        Ok(())
    }

    /// CFS quota in µs per `CPU_PERIOD_US`, or None for no limit.
    fn cpu_quota_us(&self) -> Option<u64> {
        if self.cpu_millis == u64::MAX {
            return None;
        }
        self.cpu_millis.checked_mul(CPU_PERIOD_US / 1000)
    }
}

/// Usage figures of a job cgroup. A figure the kernel does not provide
/// (e.g. `memory.peak` before Linux 5.19) is `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Peak over the job's life, or since the last v1 reset
    /// ([`crate::JobCgroup::start_peak`]).
    pub memory_peak_bytes: Option<u64>,
    /// Memory charged to the job now (v1 `memory.usage_in_bytes`, v2
    /// `memory.current`): what a live job holds between calls.
    pub memory_current_bytes: Option<u64>,
    pub cpu_ns: Option<u64>,
    /// Processes killed by the OOM killer in this cgroup.
    pub oom_kills: u64,
}

/// Whether a limit file must exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    Required,
    /// Written only when present (swap accounting may be off).
    IfPresent,
}

fn v2_num(v: u64) -> String {
    if v == u64::MAX {
        "max".to_string()
    } else {
        v.to_string()
    }
}

fn v1_num(v: u64) -> String {
    if v == u64::MAX {
        "-1".to_string()
    } else {
        v.to_string()
    }
}

/// v2 limit files, in write order, relative to the job directory.
pub(crate) fn v2_files(l: &Limits) -> Vec<(&'static str, String, Need)> {
    let cpu = match l.cpu_quota_us() {
        Some(q) => format!("{q} {CPU_PERIOD_US}"),
        None => format!("max {CPU_PERIOD_US}"),
    };
    vec![
        ("memory.max", v2_num(l.memory_bytes), Need::Required),
        ("memory.swap.max", v2_num(l.swap_bytes), Need::IfPresent),
        ("memory.oom.group", "1".to_string(), Need::Required),
        ("pids.max", v2_num(l.pids), Need::Required),
        ("cpu.max", cpu, Need::Required),
    ]
}

/// The v1 controller a limit file belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum V1Ctl {
    Memory,
    Pids,
    Cpu,
}

/// Which of the two v1 memory limits goes first. The kernel refuses
/// (EINVAL) any write that would leave memory above memory+swap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum V1MemoryOrder {
    /// Lowering (or a fresh job, whose limits are unlimited).
    MemoryFirst,
    /// Raising: memory+swap makes room first.
    MemswFirst,
}

impl V1MemoryOrder {
    /// The order for moving from the job's `current` memory limit (as read
    /// from `memory.limit_in_bytes`) to `new`.
    pub(crate) fn for_change(current: u64, new: &Limits) -> V1MemoryOrder {
        if new.memory_bytes > current {
            V1MemoryOrder::MemswFirst
        } else {
            V1MemoryOrder::MemoryFirst
        }
    }
}

/// v1 limit files, in write order (the memory pair in `order`, period
/// before quota), with the controller directory each lives in.
pub(crate) fn v1_files(
    l: &Limits,
    order: V1MemoryOrder,
) -> Vec<(V1Ctl, &'static str, String, Need)> {
    let memsw = if l.memory_bytes == u64::MAX || l.swap_bytes == u64::MAX {
        "-1".to_string()
    } else {
        l.memory_bytes
            .checked_add(l.swap_bytes)
            .map_or_else(|| "-1".to_string(), |v| v.to_string())
    };
    let quota = l
        .cpu_quota_us()
        .map_or_else(|| "-1".to_string(), |q| q.to_string());
    let memory = (
        V1Ctl::Memory,
        "memory.limit_in_bytes",
        v1_num(l.memory_bytes),
        Need::Required,
    );
    let memsw = (
        V1Ctl::Memory,
        "memory.memsw.limit_in_bytes",
        memsw,
        Need::IfPresent,
    );
    let (first, second) = match order {
        V1MemoryOrder::MemoryFirst => (memory, memsw),
        V1MemoryOrder::MemswFirst => (memsw, memory),
    };
    vec![
        first,
        second,
        (V1Ctl::Pids, "pids.max", v2_num(l.pids), Need::Required),
        (
            V1Ctl::Cpu,
            "cpu.cfs_period_us",
            CPU_PERIOD_US.to_string(),
            Need::Required,
        ),
        (V1Ctl::Cpu, "cpu.cfs_quota_us", quota, Need::Required),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: Limits = Limits {
        memory_bytes: 256 << 20,
        swap_bytes: 0,
        pids: 64,
        cpu_millis: 1500,
    };

    #[test]
    fn v2_values() {
        let f = v2_files(&L);
        let get = |n: &str| f.iter().find(|x| x.0 == n).map(|x| x.1.clone()).unwrap();
        assert_eq!(get("memory.max"), "268435456");
        assert_eq!(get("memory.swap.max"), "0");
        assert_eq!(get("memory.oom.group"), "1");
        assert_eq!(get("pids.max"), "64");
        assert_eq!(get("cpu.max"), "150000 100000");
        let u = v2_files(&Limits::UNLIMITED);
        assert_eq!(u[0].1, "max");
        assert_eq!(u[4].1, "max 100000");
    }

    #[test]
    fn v1_values_and_order() {
        let f = v1_files(
            &Limits {
                swap_bytes: 1 << 20,
                ..L
            },
            V1MemoryOrder::MemoryFirst,
        );
        let names: Vec<&str> = f.iter().map(|x| x.1).collect();
        assert_eq!(
            names,
            [
                "memory.limit_in_bytes",
                "memory.memsw.limit_in_bytes",
                "pids.max",
                "cpu.cfs_period_us",
                "cpu.cfs_quota_us"
            ]
        );
        assert_eq!(f[0].2, "268435456");
        assert_eq!(f[1].2, (257u64 << 20).to_string());
        assert_eq!(f[3].2, "100000");
        assert_eq!(f[4].2, "150000");
        let u = v1_files(&Limits::UNLIMITED, V1MemoryOrder::MemoryFirst);
        assert_eq!(u[0].2, "-1");
        assert_eq!(u[1].2, "-1");
        assert_eq!(u[2].2, "max");
        assert_eq!(u[4].2, "-1");
        let big = v1_files(
            &Limits {
                memory_bytes: u64::MAX - 1,
                swap_bytes: 5,
                ..L
            },
            V1MemoryOrder::MemoryFirst,
        );
        assert_eq!(big[1].2, "-1");
    }

    #[test]
    fn v1_memory_order() {
        // What memory.limit_in_bytes reads when unlimited (4 KiB pages).
        const V1_UNLIMITED: u64 = 9_223_372_036_854_771_712;
        let order = V1MemoryOrder::for_change;
        assert_eq!(order(V1_UNLIMITED, &L), V1MemoryOrder::MemoryFirst);
        assert_eq!(order(L.memory_bytes, &L), V1MemoryOrder::MemoryFirst);
        assert_eq!(order(L.memory_bytes - 1, &L), V1MemoryOrder::MemswFirst);
        assert_eq!(
            order(V1_UNLIMITED, &Limits::UNLIMITED),
            V1MemoryOrder::MemswFirst
        );
        let f = v1_files(&L, V1MemoryOrder::MemswFirst);
        let names: Vec<&str> = f.iter().map(|x| x.1).collect();
        assert_eq!(
            names[..2],
            ["memory.memsw.limit_in_bytes", "memory.limit_in_bytes"]
        );
        assert_eq!(f[0].2, "268435456");
        assert_eq!(f[1].2, "268435456");
    }

    #[test]
    fn validation() {
        L.validate().unwrap();
        Limits::UNLIMITED.validate().unwrap();
        for bad in [
            Limits {
                memory_bytes: 0,
                ..L
            },
            Limits { pids: 0, ..L },
            Limits { cpu_millis: 9, ..L },
            Limits {
                cpu_millis: u64::MAX - 1,
                ..L
            },
        ] {
            let e = bad.validate().unwrap_err();
            assert!(matches!(e, CgroupError::BadLimit { .. }), "{e}");
        }
    }
}
