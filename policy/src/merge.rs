//! Limit arithmetic: a caller's request may only lower what the policy allows.

use crate::schema::Policy;
use crate::validate::{MIN_MEMORY, MIN_OUTPUT_BYTES, MIN_PIDS};
use prims_protocol::jail::{JobLimits, LimitRequest};
use std::time::Duration;

/// Floors for requested values, so "0" asks for the smallest run that can
/// still start instead of one the jail cannot build. Never above the policy.
pub const FLOOR_WALL_TIME_MS: u64 = 100;
pub const FLOOR_CPU_TIME_MS: u64 = 100;
pub const FLOOR_MEMORY_BYTES: u64 = MIN_MEMORY.0;
pub const FLOOR_PIDS: u64 = MIN_PIDS;
pub const FLOOR_OUTPUT_BYTES: u64 = MIN_OUTPUT_BYTES.0;

/// `min(policy, request)`, raised to `floor` but never above `policy`.
fn lower(policy: u64, request: Option<u64>, floor: u64) -> u64 {
    match request {
        None => policy,
        Some(r) => r.min(policy).max(floor.min(policy)),
    }
}

/// Rounded up so a sub-millisecond limit does not become 0.
fn ceil_millis(d: Duration) -> u64 {
    let ms = d.as_nanos().div_ceil(1_000_000);
    u64::try_from(ms).unwrap_or(u64::MAX)
}

pub fn job_limits(p: &Policy, req: &LimitRequest) -> JobLimits {
    let l = &p.limits;
    JobLimits {
        wall_time_ms: lower(
            ceil_millis(l.wall_time.0),
            req.wall_time_ms,
            FLOOR_WALL_TIME_MS,
        ),
        cpu_time_ms: lower(
            ceil_millis(l.cpu_time.0),
            req.cpu_time_ms,
            FLOOR_CPU_TIME_MS,
        ),
        memory_bytes: lower(l.memory.0, req.memory_bytes, FLOOR_MEMORY_BYTES),
        swap_bytes: l.swap.0,
        pids: lower(l.pids, req.pids, FLOOR_PIDS),
        open_files: l.open_files,
        file_size_bytes: l.file_size.0,
        output_bytes: lower(l.output_bytes.0, req.output_bytes, FLOOR_OUTPUT_BYTES),
        tmp_size_bytes: l.tmp_size.0,
        // `as` saturates (and maps NaN to 0), which is what a limit wants.
        cpu_millis: (l.cpus * 1000.0).round() as u64,
    }
}
