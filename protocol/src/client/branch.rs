//! The branching requests: fork a session, take a checkpoint, roll back
//! to one, list them.

use super::connection::Client;
use super::error::ClientError;
use crate::branch::{CheckpointInfo, ForkReply, RestoreReply};
use crate::wire::{Reply, RequestBody};

impl Client {
    /// `count` new sessions, each a copy of the session's files and globals.
    pub async fn fork_session(
        &self,
        session_id: &str,
        tenant: Option<&str>,
        count: u32,
    ) -> Result<ForkReply, ClientError> {
        let body = RequestBody::ForkSession {
            session_id: session_id.to_owned(),
            tenant: tenant.map(str::to_owned),
            count,
        };
        match self.request(body).await? {
            Reply::Forked(f) => Ok(f),
            other => Err(ClientError::unexpected(other)),
        }
    }

    pub async fn checkpoint(
        &self,
        session_id: &str,
        tenant: Option<&str>,
        label: Option<&str>,
    ) -> Result<CheckpointInfo, ClientError> {
        let body = RequestBody::Checkpoint {
            session_id: session_id.to_owned(),
            tenant: tenant.map(str::to_owned),
            label: label.map(str::to_owned),
        };
        match self.request(body).await? {
            Reply::Checkpoint(c) => Ok(c),
            other => Err(ClientError::unexpected(other)),
        }
    }

    pub async fn restore_checkpoint(
        &self,
        session_id: &str,
        tenant: Option<&str>,
        checkpoint_id: &str,
    ) -> Result<RestoreReply, ClientError> {
        let body = RequestBody::RestoreCheckpoint {
            session_id: session_id.to_owned(),
            tenant: tenant.map(str::to_owned),
            checkpoint_id: checkpoint_id.to_owned(),
        };
        match self.request(body).await? {
            Reply::RolledBack(r) => Ok(r),
            other => Err(ClientError::unexpected(other)),
        }
    }

    pub async fn list_checkpoints(
        &self,
        session_id: &str,
        tenant: Option<&str>,
    ) -> Result<Vec<CheckpointInfo>, ClientError> {
        let body = RequestBody::ListCheckpoints {
            session_id: session_id.to_owned(),
            tenant: tenant.map(str::to_owned),
        };
        match self.request(body).await? {
            Reply::Checkpoints { checkpoints } => Ok(checkpoints),
            other => Err(ClientError::unexpected(other)),
        }
    }
}
