//! Runs as tasks: a run detached from the connection that started it,
//! whose result waits here until the client polls for it. What is kept is
//! bounded by a time to live from creation (never while working), and by
//! budgets per tenant (tasks kept, bytes of results) under server-wide
//! ceilings, from the policy's `[tasks]`. Room is only ever made from the
//! tenant's own finished tasks: one tenant cannot push out another's
//! unread result, and at a ceiling with nothing of its own to drop, a new
//! task is refused as busy. A result dropped for room leaves a small
//! tombstone that says so, until its TTL ends.

mod limits;
mod registry;
#[cfg(test)]
mod tests;

pub use limits::TaskLimits;
use prims_protocol::wire::{ErrorCode, ErrorReply, RunReply, TaskInfo};
use registry::{Entry, Inner, State};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};
use tokio_util::sync::CancellationToken;

pub struct Tasks {
    inner: Mutex<Inner>,
    /// Parent of every task's cancel token: a shutdown ends them all.
    root: CancellationToken,
}

fn not_found(task_id: &str) -> ErrorReply {
    // Another tenant's task is answered exactly like a missing one.
    ErrorReply {
        code: ErrorCode::NotFound,
        message: format!("no task {task_id}: it never existed, or its time to live ended"),
    }
}

fn busy(message: String) -> ErrorReply {
    ErrorReply {
        code: ErrorCode::Busy,
        message,
    }
}

impl Tasks {
    pub fn new(limits: TaskLimits, root: CancellationToken) -> Tasks {
        Tasks {
            inner: Mutex::new(Inner::new(limits)),
            root,
        }
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// New limits (a policy reload) for the tasks created and the results
    /// kept from now on; nothing kept is dropped for them at once.
    pub fn set_limits(&self, limits: TaskLimits) {
        self.inner().limits = limits;
    }

    /// Register a working task; its run is cancelled through the token.
    /// Room is made from `tenant`'s own finished tasks only (oldest first);
    /// without any, at its budget or at the server's ceiling, the task is
    /// refused as busy.
    pub fn create(
        &self,
        session_id: &str,
        tenant: Option<&str>,
        ttl_ms: Option<u64>,
    ) -> Result<(TaskInfo, CancellationToken), ErrorReply> {
        let now = SystemTime::now();
        let mut inner = self.inner();
        let limits = inner.limits.clone();
        let ttl = ttl_ms
            .map_or(limits.default_ttl, Duration::from_millis)
            .min(limits.max_ttl);
        inner.expire(now);
        while inner.usage(tenant).tasks >= limits.max_tasks_per_tenant {
            let Some(id) = inner.oldest_finished(tenant, false) else {
                tracing::info!(?tenant, "a task was refused: its tenant's tasks all work");
                return Err(busy(format!(
                    "you already have {} tasks working, the most this server keeps for \
                     one tenant; wait for one to finish, or cancel one with tasks/cancel",
                    limits.max_tasks_per_tenant
                )));
            };
            inner.remove(&id);
        }
        while inner.len() >= limits.max_tasks {
            let Some(id) = inner.oldest_finished(tenant, false) else {
                tracing::warn!(
                    ?tenant,
                    max_tasks = limits.max_tasks,
                    "a task was refused: the server keeps its most tasks, none of them a \
                     finished one of this tenant (raise tasks.max_tasks, or lower \
                     tasks.max_tasks_per_tenant)"
                );
                return Err(busy(format!(
                    "this server already keeps {} tasks for all its tenants, its limit, \
                     and none of them is a finished task of yours it could drop; retry \
                     when other tasks have finished and expired",
                    limits.max_tasks
                )));
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
            order: 0,
        };
        let info = entry.info(&task_id);
        inner.insert(task_id, entry);
        Ok((info, cancel))
    }

    /// Keep the run's result, dropping the tenant's own oldest results for
    /// room.
    pub fn finish(&self, task_id: &str, result: Result<RunReply, ErrorReply>) {
        self.inner().finish(task_id, result, SystemTime::now());
    }

    pub fn get(&self, task_id: &str, tenant: Option<&str>) -> Result<TaskInfo, ErrorReply> {
        let mut inner = self.inner();
        inner.expire(SystemTime::now());
        match inner.get(task_id) {
            Some(e) if e.tenant.as_deref() == tenant => Ok(e.info(task_id)),
            _ => Err(not_found(task_id)),
        }
    }

    /// Cancel a working task (its run is killed); a finished one is left
    /// as it is. Answers with the task as it now stands.
    pub fn cancel(&self, task_id: &str, tenant: Option<&str>) -> Result<TaskInfo, ErrorReply> {
        let now = SystemTime::now();
        let mut inner = self.inner();
        inner.expire(now);
        match inner.get(task_id) {
            Some(e) if e.tenant.as_deref() == tenant => {}
            _ => return Err(not_found(task_id)),
        }
        (inner.cancel(task_id, now))
            .map(|e| e.info(task_id))
            .ok_or_else(|| not_found(task_id))
    }

    /// How many tasks are working, and how many are kept.
    pub fn counts(&self) -> (u64, u64) {
        let inner = self.inner();
        let working = (inner.entries())
            .filter(|e| matches!(e.state, State::Working(_)))
            .count();
        (working as u64, inner.len() as u64)
    }
}
