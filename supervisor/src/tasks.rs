//! Runs as tasks: a run detached from the connection that started it,
//! whose result waits here until the client polls for it. The registry is
//! bounded three ways: a time to live from creation (never while working),
//! a number of tasks, and the bytes of results kept. A result evicted for
//! room leaves a small tombstone that says so, until its TTL ends.

use prims_protocol::wire::{ErrorCode, ErrorReply, RunReply};
use prims_protocol::wire::{TaskInfo, TaskStatus};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone)]
pub struct TaskLimits {
    /// When the client names none.
    pub default_ttl: Duration,
    /// The longest a client may ask for.
    pub max_ttl: Duration,
    /// Tasks kept, working or finished.
    pub max_tasks: usize,
    /// Bytes of finished results kept, all tasks together.
    pub max_result_bytes: usize,
}

impl Default for TaskLimits {
    /// The daemon's limits, as the README states them.
    fn default() -> Self {
        TaskLimits {
            default_ttl: Duration::from_secs(3600),
            max_ttl: Duration::from_secs(24 * 3600),
            max_tasks: 1024,
            max_result_bytes: 64 << 20,
        }
    }
}

enum State {
    Working(CancellationToken),
    Done(Box<Result<RunReply, ErrorReply>>, usize),
    Cancelled,
    Evicted,
}

struct Entry {
    tenant: Option<String>,
    session_id: String,
    created: SystemTime,
    updated: SystemTime,
    ttl: Duration,
    state: State,
}

#[derive(Default)]
struct Inner {
    map: HashMap<String, Entry>,
    result_bytes: usize,
}

pub struct Tasks {
    inner: Mutex<Inner>,
    limits: TaskLimits,
    /// Parent of every task's cancel token: a shutdown ends them all.
    root: CancellationToken,
}

/// What a run reply costs to keep: its output and a rough share per file.
fn cost(r: &Result<RunReply, ErrorReply>) -> usize {
    match r {
        Ok(r) => r.stdout.len() + r.stderr.len() + 256 * (r.files.len() + 1),
        Err(e) => e.message.len() + 64,
    }
}

fn ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn not_found(task_id: &str) -> ErrorReply {
    // Another tenant's task is answered exactly like a missing one.
    ErrorReply {
        code: ErrorCode::NotFound,
        message: format!("no task {task_id}: it never existed, or its time to live ended"),
    }
}

impl Entry {
    fn info(&self, task_id: &str) -> TaskInfo {
        let (status, result, error) = match &self.state {
            State::Working(_) => (TaskStatus::Working, None, None),
            State::Done(r, _) => match r.as_ref() {
                Ok(r) => (TaskStatus::Completed, Some(r.clone()), None),
                Err(e) => (TaskStatus::Completed, None, Some(e.clone())),
            },
            State::Cancelled => (TaskStatus::Cancelled, None, None),
            State::Evicted => (TaskStatus::Evicted, None, None),
        };
        TaskInfo {
            task_id: task_id.to_owned(),
            session_id: self.session_id.clone(),
            status,
            created_ms: ms(self.created),
            updated_ms: ms(self.updated),
            ttl_ms: self.ttl.as_millis() as u64,
            result,
            error,
        }
    }

    fn expired(&self, now: SystemTime) -> bool {
        !matches!(self.state, State::Working(_))
            && now.duration_since(self.created).unwrap_or_default() >= self.ttl
    }
}

impl Inner {
    fn remove(&mut self, id: &str) {
        if let Some(Entry {
            state: State::Done(_, n),
            ..
        }) = self.map.remove(id)
        {
            self.result_bytes -= n;
        }
    }

    fn expire(&mut self, now: SystemTime) {
        let gone: Vec<String> = (self.map.iter())
            .filter(|(_, e)| e.expired(now))
            .map(|(id, _)| id.clone())
            .collect();
        gone.iter().for_each(|id| self.remove(id));
    }

    /// The finished task that finished first, if any (the one to drop for room).
    fn oldest_finished(&self, results_only: bool) -> Option<String> {
        (self.map.iter())
            .filter(|(_, e)| match e.state {
                State::Done(..) => true,
                State::Cancelled | State::Evicted => !results_only,
                State::Working(_) => false,
            })
            .min_by_key(|(_, e)| e.updated)
            .map(|(id, _)| id.clone())
    }
}

impl Tasks {
    pub fn new(limits: TaskLimits, root: CancellationToken) -> Tasks {
        Tasks {
            inner: Default::default(),
            limits,
            root,
        }
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Register a working task; its run is cancelled through the token.
    pub fn create(
        &self,
        session_id: &str,
        tenant: Option<&str>,
        ttl_ms: Option<u64>,
    ) -> Result<(TaskInfo, CancellationToken), ErrorReply> {
        let ttl = ttl_ms
            .map_or(self.limits.default_ttl, Duration::from_millis)
            .min(self.limits.max_ttl);
        let now = SystemTime::now();
        let mut inner = self.inner();
        inner.expire(now);
        while inner.map.len() >= self.limits.max_tasks {
            let Some(id) = inner.oldest_finished(false) else {
                return Err(ErrorReply {
                    code: ErrorCode::Busy,
                    message: format!(
                        "{} tasks are already working; wait for one to finish",
                        self.limits.max_tasks
                    ),
                });
            };
            inner.remove(&id);
        }
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).map_err(|e| ErrorReply {
            code: ErrorCode::Internal,
            message: format!("no randomness for a task id: {e}"),
        })?;
        let task_id = hex::encode(bytes);
        let cancel = self.root.child_token();
        let entry = Entry {
            tenant: tenant.map(str::to_owned),
            session_id: session_id.to_owned(),
            created: now,
            updated: now,
            ttl,
            state: State::Working(cancel.clone()),
        };
        let info = entry.info(&task_id);
        inner.map.insert(task_id, entry);
        Ok((info, cancel))
    }

    /// Keep the run's result, evicting the oldest results for room.
    pub fn finish(&self, task_id: &str, result: Result<RunReply, ErrorReply>) {
        let mut inner = self.inner();
        let now = SystemTime::now();
        let Some(entry) = inner.map.get_mut(task_id) else {
            return;
        };
        if !matches!(entry.state, State::Working(_)) {
            return; // cancelled meanwhile: that stays the answer
        }
        entry.updated = now;
        let n = cost(&result);
        if n > self.limits.max_result_bytes {
            entry.state = State::Evicted;
            return;
        }
        entry.state = State::Done(Box::new(result), n);
        inner.result_bytes += n;
        while inner.result_bytes > self.limits.max_result_bytes {
            let Some(id) = inner.oldest_finished(true) else {
                break;
            };
            let Some(e) = inner.map.get_mut(&id) else {
                break;
            };
            if let State::Done(_, n) = std::mem::replace(&mut e.state, State::Evicted) {
                inner.result_bytes -= n;
            }
        }
    }

    pub fn get(&self, task_id: &str, tenant: Option<&str>) -> Result<TaskInfo, ErrorReply> {
        let mut inner = self.inner();
        inner.expire(SystemTime::now());
        match inner.map.get(task_id) {
            Some(e) if e.tenant.as_deref() == tenant => Ok(e.info(task_id)),
            _ => Err(not_found(task_id)),
        }
    }

    /// Cancel a working task (its run is killed); a finished one is left
    /// as it is. Answers with the task as it now stands.
    pub fn cancel(&self, task_id: &str, tenant: Option<&str>) -> Result<TaskInfo, ErrorReply> {
        let mut inner = self.inner();
        inner.expire(SystemTime::now());
        match inner.map.get_mut(task_id) {
            Some(e) if e.tenant.as_deref() == tenant => {
                if let State::Working(token) = &e.state {
                    token.cancel();
                    e.state = State::Cancelled;
                    e.updated = SystemTime::now();
                }
                Ok(e.info(task_id))
            }
            _ => Err(not_found(task_id)),
        }
    }

    /// How many tasks are working, and how many are kept.
    pub fn counts(&self) -> (u64, u64) {
        let inner = self.inner();
        let working = (inner.map.values())
            .filter(|e| matches!(e.state, State::Working(_)))
            .count();
        (working as u64, inner.map.len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prims_protocol::jail::{Outcome, Status};
    use prims_protocol::wire::{Interpreter, InterpreterState};

    fn reply(stdout: usize) -> RunReply {
        RunReply {
            outcome: Outcome {
                status: Status::Ok,
                ..Default::default()
            },
            stdout: vec![b'x'; stdout],
            stderr: Vec::new(),
            stdout_truncated: false,
            stderr_truncated: false,
            files: Vec::new(),
            env_built: false,
            interpreter: Interpreter {
                state: InterpreterState::Kept,
                reason: None,
                warm: false,
                result: None,
                result_truncated: false,
                restored: Vec::new(),
                not_restored: Vec::new(),
            },
            network: None,
        }
    }

    fn limits(max_tasks: usize, max_result_bytes: usize) -> TaskLimits {
        TaskLimits {
            default_ttl: Duration::from_secs(60),
            max_ttl: Duration::from_secs(120),
            max_tasks,
            max_result_bytes,
        }
    }

    #[test]
    fn a_task_goes_from_working_to_completed_for_its_tenant_only() {
        let t = Tasks::new(limits(8, 1 << 20), CancellationToken::new());
        let (info, _) = t.create("s1", Some("acme"), None).unwrap();
        assert_eq!(info.status, TaskStatus::Working);
        assert_eq!(info.ttl_ms, 60_000);
        assert_eq!(info.task_id.len(), 32);
        t.finish(&info.task_id, Ok(reply(10)));
        let got = t.get(&info.task_id, Some("acme")).unwrap();
        assert_eq!(got.status, TaskStatus::Completed);
        assert_eq!(got.result.unwrap().stdout.len(), 10);
        let other = t.get(&info.task_id, Some("other")).unwrap_err();
        assert_eq!(other.code, ErrorCode::NotFound);
        assert_eq!(
            t.get(&info.task_id, None).unwrap_err().code,
            ErrorCode::NotFound
        );
        // A client asks for a longer TTL than allowed: capped.
        let (long, _) = t.create("s1", None, Some(10_000_000)).unwrap();
        assert_eq!(long.ttl_ms, 120_000);
    }

    #[test]
    fn cancel_fires_the_token_and_sticks() {
        let t = Tasks::new(limits(8, 1 << 20), CancellationToken::new());
        let (info, token) = t.create("s", None, None).unwrap();
        let after = t.cancel(&info.task_id, None).unwrap();
        assert!(token.is_cancelled());
        assert_eq!(after.status, TaskStatus::Cancelled);
        // The run's late reply does not overwrite the cancellation.
        t.finish(&info.task_id, Ok(reply(1)));
        assert_eq!(
            t.get(&info.task_id, None).unwrap().status,
            TaskStatus::Cancelled
        );
    }

    #[test]
    fn results_beyond_the_byte_cap_evict_the_oldest() {
        let t = Tasks::new(limits(8, 3000), CancellationToken::new());
        let (a, _) = t.create("s", None, None).unwrap();
        let (b, _) = t.create("s", None, None).unwrap();
        t.finish(&a.task_id, Ok(reply(1500)));
        t.finish(&b.task_id, Ok(reply(1500)));
        assert_eq!(t.get(&a.task_id, None).unwrap().status, TaskStatus::Evicted);
        assert_eq!(
            t.get(&b.task_id, None).unwrap().status,
            TaskStatus::Completed
        );
        // One result larger than the whole cap is never kept.
        let (c, _) = t.create("s", None, None).unwrap();
        t.finish(&c.task_id, Ok(reply(4000)));
        assert_eq!(t.get(&c.task_id, None).unwrap().status, TaskStatus::Evicted);
        assert_eq!(
            t.get(&b.task_id, None).unwrap().status,
            TaskStatus::Completed
        );
    }

    #[test]
    fn the_task_cap_drops_finished_tasks_and_refuses_when_all_work() {
        let t = Tasks::new(limits(2, 1 << 20), CancellationToken::new());
        let (a, _) = t.create("s", None, None).unwrap();
        let (_b, _) = t.create("s", None, None).unwrap();
        assert_eq!(t.create("s", None, None).unwrap_err().code, ErrorCode::Busy);
        t.finish(&a.task_id, Ok(reply(1)));
        let (_c, _) = t.create("s", None, None).unwrap();
        assert_eq!(
            t.get(&a.task_id, None).unwrap_err().code,
            ErrorCode::NotFound
        );
        assert_eq!(t.counts(), (2, 2));
    }

    #[test]
    fn finished_tasks_expire_after_their_ttl_working_ones_never() {
        let t = Tasks::new(limits(8, 1 << 20), CancellationToken::new());
        let (a, _) = t.create("s", None, Some(1)).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(t.get(&a.task_id, None).unwrap().status, TaskStatus::Working);
        t.finish(&a.task_id, Ok(reply(1)));
        assert_eq!(
            t.get(&a.task_id, None).unwrap_err().code,
            ErrorCode::NotFound
        );
    }

    #[test]
    fn a_shutdown_cancels_every_task() {
        let root = CancellationToken::new();
        let t = Tasks::new(limits(8, 1 << 20), root.clone());
        let (_, token) = t.create("s", None, None).unwrap();
        root.cancel();
        assert!(token.is_cancelled());
    }
}
