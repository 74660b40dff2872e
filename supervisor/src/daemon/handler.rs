//! Which phase answers each request of the socket.

use super::replies::bad_request;
use super::state::Daemon;
use super::{branch, mount, run, task};
use crate::server::{Ctx, Handler};
use prims_protocol::wire::{ErrorCode, ErrorReply, Reply, RequestBody};
use std::sync::Arc;

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
                let policy = self.policy();
                let info = self
                    .blocking(
                        move || match live.claim(&sessions, tenant.clone(), &policy) {
                            Some(info) => Ok(info),
                            None => sessions.create(tenant).map_err(|e| e.to_reply()),
                        },
                    )
                    .await?;
                Ok(Reply::Session(info))
            }
            RequestBody::CloseSession { session_id, tenant } => {
                self.close(session_id, tenant).await?;
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
            RequestBody::History {
                session_id,
                tenant,
                from,
            } => {
                let page = self
                    .blocking(move || {
                        sessions
                            .history(&session_id, tenant.as_deref(), from)
                            .map_err(|e| e.to_reply())
                    })
                    .await?;
                Ok(Reply::History(page))
            }
            RequestBody::WriteMount {
                session_id,
                tenant,
                path,
                size,
            } => mount::write_mount(self, session_id, tenant, path, size, ctx).await,
            RequestBody::ForkSession {
                session_id,
                tenant,
                count,
            } => branch::fork(self, (session_id, tenant), count, ctx).await,
            RequestBody::Checkpoint {
                session_id,
                tenant,
                label,
            } => branch::checkpoint(self, (session_id, tenant), label, ctx).await,
            RequestBody::RestoreCheckpoint {
                session_id,
                tenant,
                checkpoint_id,
            } => branch::restore(self, (session_id, tenant), checkpoint_id, ctx).await,
            RequestBody::ListCheckpoints { session_id, tenant } => {
                branch::list(self, (session_id, tenant)).await
            }
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
