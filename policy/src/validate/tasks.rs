//! `[tasks]`: the TTLs and the budgets of kept task results. A budget of
//! one tenant above the server's ceiling could never be used, and the
//! ceilings themselves must stay within what one supervisor can hold in
//! memory, however many tenants there are.

use super::findings::{Finding, Findings};
use crate::schema::Policy;
use crate::spans::KeyPath;
use crate::units::{ByteSize, HumanDuration};
use std::time::Duration;

/// Results wait this long at most after their task was created.
pub const MAX_TASK_TTL: HumanDuration = HumanDuration::secs(7 * 24 * 3600);
/// Each task kept costs a few hundred bytes besides its result.
pub const MAX_TASKS: u32 = 100_000;
/// Task results live in the supervisor's memory.
pub const MAX_TASK_RESULT_BYTES: ByteSize = ByteSize::gib(4);
/// Less would keep hardly any run's output.
pub const MIN_TASK_RESULT_BYTES: ByteSize = ByteSize::kib(64);

pub(super) fn check(p: &Policy, f: &mut Findings) {
    let t = &p.tasks;
    let at = |k: &str| KeyPath::new(&["tasks", k]);
    let min_ttl = HumanDuration(Duration::from_secs(1));
    if t.max_ttl < min_ttl || t.max_ttl > MAX_TASK_TTL {
        f.add(
            at("max_ttl"),
            format!(
                "{} is out of range (at least {min_ttl}, at most {MAX_TASK_TTL})",
                t.max_ttl
            ),
        );
    }
    if t.default_ttl < min_ttl {
        f.add(
            at("default_ttl"),
            format!("{} is too short (at least {min_ttl})", t.default_ttl),
        );
    } else if t.default_ttl > t.max_ttl {
        f.0.push(Finding {
            paths: vec![at("default_ttl"), at("max_ttl")],
            message: format!(
                "{} is longer than max_ttl ({}), which caps every TTL",
                t.default_ttl, t.max_ttl
            ),
        });
    }
    // A tenant's budget is compared with a ceiling only when the ceiling
    // itself is valid: one mistake, one message.
    let tasks_ok = (1..=MAX_TASKS).contains(&t.max_tasks);
    if !tasks_ok {
        f.add(
            at("max_tasks"),
            format!(
                "{} is out of range (at least 1, at most {MAX_TASKS})",
                t.max_tasks
            ),
        );
    }
    if t.max_tasks_per_tenant == 0 {
        f.add(
            at("max_tasks_per_tenant"),
            "0 would refuse every task (at least 1)".to_string(),
        );
    } else if tasks_ok && t.max_tasks_per_tenant > t.max_tasks {
        f.0.push(Finding {
            paths: vec![at("max_tasks_per_tenant"), at("max_tasks")],
            message: format!(
                "{} is more than max_tasks ({}), the ceiling of all tenants together",
                t.max_tasks_per_tenant, t.max_tasks
            ),
        });
    }
    let bytes = t.max_result_bytes;
    let bytes_ok = (MIN_TASK_RESULT_BYTES..=MAX_TASK_RESULT_BYTES).contains(&bytes);
    if !bytes_ok {
        f.add(
            at("max_result_bytes"),
            format!(
                "{bytes} is out of range (at least {MIN_TASK_RESULT_BYTES}, at most {MAX_TASK_RESULT_BYTES})"
            ),
        );
    }
    let per = t.max_result_bytes_per_tenant;
    if per < MIN_TASK_RESULT_BYTES {
        f.add(
            at("max_result_bytes_per_tenant"),
            format!("{per} is too small (at least {MIN_TASK_RESULT_BYTES})"),
        );
    } else if bytes_ok && per > bytes {
        f.0.push(Finding {
            paths: vec![at("max_result_bytes_per_tenant"), at("max_result_bytes")],
            message: format!(
                "{per} is more than max_result_bytes ({bytes}), the ceiling of all tenants together"
            ),
        });
    }
}
