//! The kept tasks and what each tenant uses of its budget. Every way a
//! task leaves (expiry, room for a new task, room for a result) goes
//! through here, so the per-tenant counts and the totals never drift.

use super::limits::TaskLimits;
use prims_protocol::wire::{ErrorReply, RunReply, TaskInfo, TaskStatus};
use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio_util::sync::CancellationToken;

pub(super) enum State {
    Working(CancellationToken),
    Done(Box<Result<RunReply, ErrorReply>>, usize),
    Cancelled,
    Evicted,
}

pub(super) struct Entry {
    pub tenant: Option<String>,
    pub session_id: String,
    pub created: SystemTime,
    pub updated: SystemTime,
    pub ttl: Duration,
    pub state: State,
    /// When it stopped working, as a sequence number: the lowest goes
    /// first for room (clock readings can tie, or step back).
    pub order: u64,
}

/// What one tenant holds: tasks kept (any state) and bytes of results.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Usage {
    pub tasks: usize,
    pub bytes: usize,
}

pub(super) struct Inner {
    pub limits: TaskLimits,
    map: HashMap<String, Entry>,
    /// Bytes of results kept, all tenants together.
    result_bytes: usize,
    /// Per tenant (`None`: no bearer tokens, one tenant for all); a tenant
    /// with nothing kept has no entry, so this is never larger than `map`.
    tenants: HashMap<Option<String>, Usage>,
    next_order: u64,
}

fn ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// What a run reply costs to keep: its output and a rough share per file.
pub(super) fn cost(r: &Result<RunReply, ErrorReply>) -> usize {
    match r {
        Ok(r) => r.stdout.len() + r.stderr.len() + 256 * (r.files.len() + 1),
        Err(e) => e.message.len() + 64,
    }
}

impl Entry {
    pub fn info(&self, task_id: &str) -> TaskInfo {
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
    pub fn new(limits: TaskLimits) -> Inner {
        Inner {
            limits,
            map: HashMap::new(),
            result_bytes: 0,
            tenants: HashMap::new(),
            next_order: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.map.values()
    }

    pub fn get(&self, id: &str) -> Option<&Entry> {
        self.map.get(id)
    }

    pub fn usage(&self, tenant: Option<&str>) -> Usage {
        (self.tenants.get(&tenant.map(str::to_owned)))
            .copied()
            .unwrap_or_default()
    }

    fn usage_mut(&mut self, tenant: &Option<String>) -> &mut Usage {
        self.tenants.entry(tenant.clone()).or_default()
    }

    fn stamp(&mut self) -> u64 {
        self.next_order += 1;
        self.next_order
    }

    pub fn insert(&mut self, id: String, entry: Entry) {
        self.usage_mut(&entry.tenant).tasks += 1;
        self.map.insert(id, entry);
    }

    pub fn remove(&mut self, id: &str) {
        let Some(e) = self.map.remove(id) else {
            return;
        };
        let freed = match e.state {
            State::Done(_, n) => n,
            _ => 0,
        };
        self.result_bytes -= freed;
        let u = self.usage_mut(&e.tenant);
        u.tasks -= 1;
        u.bytes -= freed;
        if u.tasks == 0 {
            self.tenants.remove(&e.tenant);
        }
    }

    /// Drop a kept result, leaving its tombstone.
    fn evict(&mut self, id: &str) {
        let Some(e) = self.map.get_mut(id) else {
            return;
        };
        if let State::Done(_, n) = std::mem::replace(&mut e.state, State::Evicted) {
            let tenant = e.tenant.clone();
            self.result_bytes -= n;
            self.usage_mut(&tenant).bytes -= n;
            tracing::info!(task = %id, bytes = n, "a task's result was dropped for room, within its own tenant's results");
        }
    }

    pub fn expire(&mut self, now: SystemTime) {
        let gone: Vec<String> = (self.map.iter())
            .filter(|(_, e)| e.expired(now))
            .map(|(id, _)| id.clone())
            .collect();
        gone.iter().for_each(|id| self.remove(id));
    }

    /// `tenant`'s task that stopped working first, if any: the one to drop
    /// for room. Another tenant's is never a candidate.
    pub fn oldest_finished(&self, tenant: Option<&str>, results_only: bool) -> Option<String> {
        (self.map.iter())
            .filter(|(_, e)| e.tenant.as_deref() == tenant)
            .filter(|(_, e)| match e.state {
                State::Done(..) => true,
                State::Cancelled | State::Evicted => !results_only,
                State::Working(_) => false,
            })
            .min_by_key(|(_, e)| e.order)
            .map(|(id, _)| id.clone())
    }

    /// A working task was cancelled: it now counts as finished.
    pub fn cancel(&mut self, id: &str, now: SystemTime) -> Option<&Entry> {
        let order = self.stamp();
        let e = self.map.get_mut(id)?;
        if let State::Working(token) = &e.state {
            token.cancel();
            e.state = State::Cancelled;
            e.updated = now;
            e.order = order;
        }
        Some(e)
    }

    /// Keep a working task's result within its tenant's budget and the
    /// server's ceiling, by dropping that tenant's oldest results (this
    /// one, the newest, last). A result larger than either is not kept.
    pub fn finish(&mut self, id: &str, result: Result<RunReply, ErrorReply>, now: SystemTime) {
        let order = self.stamp();
        let (per_tenant, ceiling) = (
            self.limits.max_result_bytes_per_tenant,
            self.limits.max_result_bytes,
        );
        let Some(e) = self.map.get_mut(id) else {
            return;
        };
        if !matches!(e.state, State::Working(_)) {
            return; // cancelled meanwhile: that stays the answer
        }
        e.updated = now;
        e.order = order;
        let n = cost(&result);
        if n > per_tenant.min(ceiling) {
            e.state = State::Evicted;
            tracing::info!(task = %id, bytes = n, "a task's result is larger than a tenant's budget and was not kept");
            return;
        }
        e.state = State::Done(Box::new(result), n);
        let tenant = e.tenant.clone();
        self.result_bytes += n;
        self.usage_mut(&tenant).bytes += n;
        while self.usage(tenant.as_deref()).bytes > per_tenant || self.result_bytes > ceiling {
            let Some(old) = self.oldest_finished(tenant.as_deref(), true) else {
                break;
            };
            self.evict(&old);
        }
    }
}
