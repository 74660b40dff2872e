//! The supervisor daemon: the request handler behind the socket, wiring
//! sessions, environments, the scheduler and the jailer together.

mod mount;
mod network;
pub(crate) use network::NetCall;
mod run;
mod scheduler;
mod startup;
mod task;

pub use startup::{start, DaemonConfig, SUPERVISOR_LEAF};

use crate::audit::Audit;
use crate::envs::Envs;
use crate::interpreters::Interpreters;
use crate::server::{Ctx, Handler};
use crate::sessions::SessionStore;
use prims_policy::Policy;
use prims_protocol::wire::{ErrorCode, ErrorReply, Reply, RequestBody, Stats};
use scheduler::Scheduler;
use std::sync::{Arc, RwLock};

pub struct Daemon {
    policy: RwLock<Arc<Policy>>,
    sessions: Arc<SessionStore>,
    envs: Arc<Envs>,
    scheduler: Scheduler,
    interpreters: Arc<Interpreters>,
    audit: Arc<Audit>,
    tasks: crate::tasks::Tasks,
    /// Egress decisions since start: connections allowed, and refused.
    egress_allowed: std::sync::atomic::AtomicU64,
    egress_denied: std::sync::atomic::AtomicU64,
    /// Set by `Drain`: no new sessions, for good (a restart clears it).
    draining: std::sync::atomic::AtomicBool,
}

pub(crate) fn bad_request(message: impl Into<String>) -> ErrorReply {
    ErrorReply {
        code: ErrorCode::BadRequest,
        message: message.into(),
    }
}

pub(crate) fn internal(message: impl std::fmt::Display) -> ErrorReply {
    ErrorReply {
        code: ErrorCode::Internal,
        message: message.to_string(),
    }
}

impl Daemon {
    fn policy(&self) -> Arc<Policy> {
        self.policy
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Run a blocking store or filesystem call off the async threads.
    async fn blocking<T, F>(&self, f: F) -> Result<T, ErrorReply>
    where
        F: FnOnce() -> Result<T, ErrorReply> + Send + 'static,
        T: Send + 'static,
    {
        tokio::task::spawn_blocking(f)
            .await
            .map_err(|e| internal(format!("worker failed: {e}")))?
    }

    /// The live session `id` of `tenant`.
    async fn session(
        &self,
        id: String,
        tenant: Option<String>,
    ) -> Result<Arc<crate::sessions::Session>, ErrorReply> {
        let sessions = self.sessions.clone();
        self.blocking(move || {
            sessions
                .get(&id, tenant.as_deref())
                .map_err(|e| e.to_reply())
        })
        .await
    }

    /// Put a new policy in force for runs and tasks that start from now on;
    /// runs already going keep the spec they were built with. The identity range,
    /// cgroup parent and interpreter are fixed at start-up.
    pub fn reload(&self, policy: Policy) {
        let old = self.policy();
        if old.identity != policy.identity || old.cgroup != policy.cgroup {
            tracing::warn!("[identity] and [cgroup] changes take effect after a restart");
        }
        self.sessions
            .update_policy(&crate::sessions::SessionPolicy::from(&policy));
        self.envs.update_policy(&policy);
        self.tasks
            .set_limits(crate::tasks::TaskLimits::from(&policy.tasks));
        *self.policy.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(policy);
        tracing::info!("policy reloaded");
    }

    fn stats(&self) -> Stats {
        let env = self.envs.stats();
        let live = self.interpreters.stats();
        let (tasks_working, tasks_kept) = self.tasks.counts();
        Stats {
            draining: self.draining.load(std::sync::atomic::Ordering::Relaxed),
            tasks_working,
            tasks_kept,
            egress_allowed: self
                .egress_allowed
                .load(std::sync::atomic::Ordering::Relaxed),
            egress_denied: self
                .egress_denied
                .load(std::sync::atomic::Ordering::Relaxed),
            interpreters_live: live.live,
            interpreters_memory_bytes: live.memory_bytes,
            pool_ready: live.pool_ready,
            pool_memory_bytes: live.pool_memory_bytes,
            sessions: self.sessions.len() as u64,
            runs_active: self.scheduler.active(),
            runs_queued: self.scheduler.queued(),
            runs_total: self.scheduler.total(),
            envs: env.envs,
            env_builds: env.builds,
            base_env_ready: self.envs.base_ready(),
        }
    }
}

impl Handler for Arc<Daemon> {
    async fn handle(&self, body: RequestBody, ctx: Ctx) -> Result<Reply, ErrorReply> {
        let sessions = self.sessions.clone();
        match body {
            RequestBody::OpenSession { tenant } => {
                if self.draining.load(std::sync::atomic::Ordering::Relaxed) {
                    return Err(ErrorReply {
                        code: ErrorCode::Draining,
                        message: "this node is draining for a restart and opens no new \
                                  session; another node will"
                            .into(),
                    });
                }
                let live = self.interpreters.clone();
                let info = self
                    .blocking(move || match live.claim(&sessions, tenant.clone()) {
                        Some(info) => Ok(info),
                        None => sessions.create(tenant).map_err(|e| e.to_reply()),
                    })
                    .await?;
                Ok(Reply::Session(info))
            }
            RequestBody::CloseSession { session_id, tenant } => {
                let live = self.interpreters.clone();
                self.blocking(move || {
                    // Only its tenant may close it; then its interpreter goes first.
                    sessions
                        .info(&session_id, tenant.as_deref())
                        .map_err(|e| e.to_reply())?;
                    if let Ok(name) = sessions.name_of(&session_id) {
                        live.forget(&name);
                    }
                    sessions
                        .close(&session_id, tenant.as_deref())
                        .map_err(|e| e.to_reply())
                })
                .await?;
                Ok(Reply::Closed)
            }
            RequestBody::SessionInfo { session_id, tenant } => {
                let info = self
                    .blocking(move || {
                        sessions
                            .info(&session_id, tenant.as_deref())
                            .map_err(|e| e.to_reply())
                    })
                    .await?;
                Ok(Reply::Session(info))
            }
            RequestBody::Run(req) => run::run(self, req, ctx).await,
            RequestBody::ListDir {
                session_id,
                tenant,
                path,
            } => {
                let entries = self
                    .blocking(move || {
                        let s = sessions
                            .get(&session_id, tenant.as_deref())
                            .map_err(|e| e.to_reply())?;
                        crate::fsops::list_dir(&s.workspace, &path).map_err(|e| e.to_reply())
                    })
                    .await?;
                Ok(Reply::Dir { entries })
            }
            RequestBody::ReadFile {
                session_id,
                tenant,
                path,
                offset,
                limit,
            } => {
                let data = self
                    .blocking(move || {
                        let s = sessions
                            .get(&session_id, tenant.as_deref())
                            .map_err(|e| e.to_reply())?;
                        crate::fsops::read_file(&s.workspace, &path, offset, limit)
                            .map_err(|e| e.to_reply())
                    })
                    .await?;
                Ok(Reply::File(data))
            }
            RequestBody::WriteMount {
                session_id,
                tenant,
                path,
                size,
            } => mount::write_mount(self, session_id, tenant, path, size, ctx).await,
            RequestBody::Stats => Ok(Reply::Stats(self.stats())),
            // Only root (the operator, `prims serve`): the front-end must not
            // be able to take its node out of service.
            RequestBody::Drain if ctx.peer.uid != 0 => Err(ErrorReply {
                code: ErrorCode::Forbidden,
                message: "only root may drain the supervisor".into(),
            }),
            RequestBody::Drain => {
                if !self
                    .draining
                    .swap(true, std::sync::atomic::Ordering::Relaxed)
                {
                    tracing::info!("draining: no new sessions from now on");
                }
                Ok(Reply::Stats(self.stats()))
            }
            RequestBody::StartTask { run, ttl_ms } => task::start(self, run, ttl_ms, ctx).await,
            RequestBody::GetTask { task_id, tenant } => {
                Ok(Reply::Task(self.tasks.get(&task_id, tenant.as_deref())?))
            }
            RequestBody::CancelTask { task_id, tenant } => {
                Ok(Reply::Task(self.tasks.cancel(&task_id, tenant.as_deref())?))
            }
            // The server answers these itself; reaching here is a bug.
            RequestBody::Cancel { .. }
            | RequestBody::MountChunk { .. }
            | RequestBody::MountEnd { .. } => Err(bad_request(
                "cancel, mount_chunk and mount_end are handled by the connection",
            )),
        }
    }
}
