//! Prometheus text for `GET /metrics`: runs by status, a run-duration
//! histogram and tool calls counted here; sessions, runs in flight and
//! environment builds read from the supervisor's `Stats` at scrape time.

use prims_protocol::wire::Stats;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;

/// Upper bounds of the run-duration buckets, in seconds.
const BUCKETS: [f64; 13] = [
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

#[derive(Debug, Default)]
pub(crate) struct Metrics {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    runs: BTreeMap<String, u64>,
    buckets: [u64; BUCKETS.len()],
    sum_secs: f64,
    count: u64,
    tools: BTreeMap<(String, &'static str), u64>,
}

impl Metrics {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A finished run (status as in the run_code result) and its duration
    /// as the front-end saw it.
    pub(crate) fn record_run(&self, status: &str, took: Duration) {
        let secs = took.as_secs_f64();
        let mut m = self.lock();
        *m.runs.entry(status.to_owned()).or_default() += 1;
        for (i, le) in BUCKETS.iter().enumerate() {
            if secs <= *le {
                m.buckets[i] += 1;
            }
        }
        m.sum_secs += secs;
        m.count += 1;
    }

    pub(crate) fn record_tool(&self, tool: &str, ok: bool) {
        let outcome = if ok { "ok" } else { "error" };
        *self
            .lock()
            .tools
            .entry((tool.to_owned(), outcome))
            .or_default() += 1;
    }

    pub(crate) fn render(&self, stats: Option<&Stats>) -> String {
        let m = self.lock();
        let mut out = String::new();
        let _ = writeln!(out, "# HELP prims_runs_total Runs finished, by status.");
        let _ = writeln!(out, "# TYPE prims_runs_total counter");
        for (status, n) in &m.runs {
            let _ = writeln!(out, "prims_runs_total{{status=\"{status}\"}} {n}");
        }
        let _ = writeln!(
            out,
            "# HELP prims_run_duration_seconds run_code duration, end to end."
        );
        let _ = writeln!(out, "# TYPE prims_run_duration_seconds histogram");
        for (le, n) in BUCKETS.iter().zip(m.buckets.iter()) {
            let _ = writeln!(out, "prims_run_duration_seconds_bucket{{le=\"{le}\"}} {n}");
        }
        let _ = writeln!(
            out,
            "prims_run_duration_seconds_bucket{{le=\"+Inf\"}} {}",
            m.count
        );
        let _ = writeln!(out, "prims_run_duration_seconds_sum {}", m.sum_secs);
        let _ = writeln!(out, "prims_run_duration_seconds_count {}", m.count);
        let _ = writeln!(
            out,
            "# HELP prims_tool_calls_total Tool calls, by tool and outcome."
        );
        let _ = writeln!(out, "# TYPE prims_tool_calls_total counter");
        for ((tool, outcome), n) in &m.tools {
            let _ = writeln!(
                out,
                "prims_tool_calls_total{{tool=\"{tool}\",outcome=\"{outcome}\"}} {n}"
            );
        }
        drop(m);
        let up = u8::from(stats.is_some());
        let _ = writeln!(
            out,
            "# HELP prims_supervisor_up Whether the supervisor answered."
        );
        let _ = writeln!(out, "# TYPE prims_supervisor_up gauge");
        let _ = writeln!(out, "prims_supervisor_up {up}");
        if let Some(s) = stats {
            let gauges = [
                (
                    "prims_sessions_active",
                    "Open sessions (workspaces).",
                    s.sessions,
                ),
                ("prims_runs_active", "Runs in a jail now.", s.runs_active),
                (
                    "prims_runs_queued",
                    "Runs waiting for a slot.",
                    s.runs_queued,
                ),
                ("prims_environments", "Cached Python environments.", s.envs),
                (
                    "prims_base_env_ready",
                    "Whether the base environment is built.",
                    u64::from(s.base_env_ready),
                ),
                (
                    "prims_interpreters_live",
                    "Live interpreters that belong to a session.",
                    s.interpreters_live,
                ),
                (
                    "prims_interpreters_memory_bytes",
                    "Memory the live interpreters hold, as their cgroups count it.",
                    s.interpreters_memory_bytes,
                ),
                (
                    "prims_pool_ready",
                    "Warm interpreters ready in the pool.",
                    s.pool_ready,
                ),
                (
                    "prims_pool_memory_bytes",
                    "Memory the pool's interpreters hold.",
                    s.pool_memory_bytes,
                ),
                (
                    "prims_templates_up",
                    "Fork templates up, one per environment in use.",
                    s.templates_up,
                ),
                (
                    "prims_tasks_working",
                    "run_code tasks whose run is still going.",
                    s.tasks_working,
                ),
                (
                    "prims_tasks_kept",
                    "run_code tasks kept, working or finished with their result.",
                    s.tasks_kept,
                ),
            ];
            for (name, help, v) in gauges {
                let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
            }
            let counters = [
                (
                    "prims_environment_builds_total",
                    "Environments built.",
                    s.env_builds,
                ),
                (
                    "prims_supervisor_runs_total",
                    "Runs the supervisor started.",
                    s.runs_total,
                ),
                (
                    "prims_egress_allowed_total",
                    "Connections the egress proxy let through.",
                    s.egress_allowed,
                ),
                (
                    "prims_egress_denied_total",
                    "Connections the egress proxy refused or cut.",
                    s.egress_denied,
                ),
                (
                    "prims_interpreter_starts_forked_total",
                    "Interpreters forked from a template since the supervisor started.",
                    s.starts_forked,
                ),
                (
                    "prims_interpreter_starts_cold_total",
                    "Interpreters started cold (templates off, not up, or a fork that failed).",
                    s.starts_cold,
                ),
                (
                    "prims_interpreter_starts_in_place_total",
                    "Fresh interpreters forked in place of a forked one, in its jail (`fresh: true`).",
                    s.starts_in_place,
                ),
                (
                    "prims_autosaves_total",
                    "Background saves of sessions' globals (interpreters.autosave_after).",
                    s.autosaves,
                ),
                (
                    "prims_autosave_cpu_milliseconds_total",
                    "CPU the jails spent on background saves, as their cgroups count it.",
                    s.autosave_cpu_ms,
                ),
            ];
            for (name, help, v) in counters {
                let _ = writeln!(
                    out,
                    "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}"
                );
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_is_cumulative() {
        let m = Metrics::default();
        m.record_run("ok", Duration::from_millis(30));
        m.record_run("timeout", Duration::from_secs(2));
        let text = m.render(None);
        assert!(text.contains("prims_runs_total{status=\"ok\"} 1"));
        assert!(text.contains("prims_run_duration_seconds_bucket{le=\"0.05\"} 1"));
        assert!(text.contains("prims_run_duration_seconds_bucket{le=\"2.5\"} 2"));
        assert!(text.contains("prims_run_duration_seconds_count 2"));
        assert!(text.contains("prims_supervisor_up 0"));
    }
}
