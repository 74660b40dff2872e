//! Which supervisor session (workspace) a call uses, and who may use it.
//!
//! 1. An explicit `session_id` argument, after checking that it belongs to
//!    the caller's tenant.
//! 2. Else the session bound to the legacy `Mcp-Session-Id`, opened on first use.
//! 3. Else a new session.
//!
//! The front-end also remembers what `mount_file` downloaded, per session,
//! so the same url and path is not fetched twice.

use crate::auth::Tenant;
use crate::error::ToolError;
use crate::pool::SupervisorPool;
use prims_protocol::client::ClientError;
use prims_protocol::node::NodeId;
use prims_protocol::wire::{is_session_id, ErrorCode};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Who is calling, from the HTTP request a tool call arrived on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Caller {
    pub(crate) tenant: Option<String>,
    /// The legacy `Mcp-Session-Id`, if the client has one.
    pub(crate) mcp_session: Option<String>,
}

impl Caller {
    pub(crate) fn from_parts(parts: Option<&http::request::Parts>) -> Caller {
        let Some(parts) = parts else {
            return Caller::default();
        };
        Caller {
            tenant: parts.extensions.get::<Tenant>().and_then(|t| t.0.clone()),
            mcp_session: parts
                .headers
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
        }
    }
}

/// A session as the front-end uses it: its id, and the tenant every
/// request about it acts for (the supervisor checks the two belong
/// together).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SessionRef {
    pub(crate) id: String,
    pub(crate) tenant: Option<String>,
}

impl SessionRef {
    /// What logs call the session: a digest, never the id, which is a
    /// capability (whoever reads it may use the session).
    pub(crate) fn tag(&self) -> String {
        log_tag(&self.id)
    }
}

/// 48 bits of the SHA-256 of a session id: enough to follow one session
/// through the logs, useless for reaching it.
fn log_tag(id: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(&Sha256::digest(id.as_bytes())[..6])
}

#[derive(Debug, Clone)]
struct Binding {
    session: String,
    tenant: Option<String>,
}

type MountKey = (String, String, String);

pub(crate) struct Sessions {
    sup: Arc<SupervisorPool>,
    /// In a cluster, this node: a session id of another node means the
    /// router could not reach that one.
    node: Option<NodeId>,
    bound: tokio::sync::Mutex<HashMap<String, Binding>>,
    mounts: Mutex<HashMap<MountKey, u64>>,
}

fn gone(id: &str) -> ToolError {
    ToolError(format!(
        "Session {id} does not exist or has expired. Omit session_id to start a new session."
    ))
}

impl Sessions {
    pub(crate) fn new(sup: Arc<SupervisorPool>, node: Option<NodeId>) -> Sessions {
        Sessions {
            sup,
            node,
            bound: Default::default(),
            mounts: Default::default(),
        }
    }

    /// The session a tool call uses (see the module docs).
    pub(crate) async fn resolve(
        &self,
        explicit: Option<&str>,
        caller: &Caller,
    ) -> Result<SessionRef, ToolError> {
        let tenant = caller.tenant.clone();
        let session = |id: String| SessionRef {
            id,
            tenant: tenant.clone(),
        };
        if let Some(id) = explicit.map(str::trim).filter(|s| !s.is_empty()) {
            self.on_this_node(id)?;
            let s = session(id.to_owned());
            self.check(&s).await?;
            return Ok(s);
        }
        let Some(mcp) = caller.mcp_session.as_deref() else {
            let s = self.open(caller).await?;
            tracing::debug!(session = %log_tag(&s), "opened a session for a stateless call");
            return Ok(session(s));
        };
        let existing = self.bound.lock().await.get(mcp).cloned();
        if let Some(b) = &existing {
            if b.tenant != caller.tenant {
                return Err(ToolError::new(
                    "This MCP session belongs to another client; initialize a new one.",
                ));
            }
            match self.info(&session(b.session.clone())).await {
                Ok(()) => return Ok(session(b.session.clone())),
                Err(e) if e.code() == Some(ErrorCode::NotFound) => {
                    tracing::info!(session = %log_tag(&b.session), "bound session expired; opening a new one");
                }
                Err(e) => return Err(e.into()),
            }
        }
        let mut bound = self.bound.lock().await;
        if let Some(now) = bound.get(mcp) {
            // Another call bound (or re-bound) it meanwhile.
            if existing.as_ref().map(|b| &b.session) != Some(&now.session) {
                return Ok(session(now.session.clone()));
            }
        }
        let s = self.open(caller).await?;
        tracing::debug!(session = %log_tag(&s), "opened a session for an MCP session");
        bound.insert(
            mcp.to_owned(),
            Binding {
                session: s.clone(),
                tenant: caller.tenant.clone(),
            },
        );
        Ok(session(s))
    }

    /// In a cluster, a session id of another node reaches this one only
    /// when the router found that node down: say so, never open a new
    /// empty workspace in its place.
    fn on_this_node(&self, id: &str) -> Result<(), ToolError> {
        match (self.node, NodeId::of(id)) {
            (Some(me), Some(theirs)) if theirs != me && is_session_id(id) => {
                Err(ToolError(node_gone(
                    &format!("Session {id}"),
                    theirs,
                    "Start over in a new session (omit session_id)",
                )))
            }
            _ => Ok(()),
        }
    }

    /// A new session for the caller's tenant: its id.
    async fn open(&self, caller: &Caller) -> Result<String, ClientError> {
        let c = self.sup.client().await?;
        Ok(c.open_session(caller.tenant.as_deref()).await?.session_id)
    }

    /// Whether `s` exists for its tenant, as the supervisor answers it.
    async fn info(&self, s: &SessionRef) -> Result<(), ClientError> {
        let c = self.sup.client().await?;
        c.session_info(&s.id, s.tenant.as_deref()).await.map(drop)
    }

    async fn close(&self, s: &SessionRef) -> Result<(), ClientError> {
        let c = self.sup.client().await?;
        c.close_session(&s.id, s.tenant.as_deref()).await
    }

    /// Fails unless the session exists and belongs to its tenant. The
    /// supervisor checks the tenant and answers another tenant's session
    /// exactly as a missing one.
    pub(crate) async fn check(&self, s: &SessionRef) -> Result<(), ToolError> {
        match self.info(s).await {
            Ok(()) => Ok(()),
            Err(e) if e.code() == Some(ErrorCode::NotFound) => {
                tracing::debug!(session = %s.tag(), tenant = ?s.tenant, "no such session for this tenant");
                Err(gone(&s.id))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The session bound to a legacy MCP session, if any, for `tenant`.
    pub(crate) async fn bound(&self, mcp: &str, tenant: Option<&str>) -> Option<SessionRef> {
        let bound = self.bound.lock().await;
        bound
            .get(mcp)
            .filter(|b| b.tenant.as_deref() == tenant)
            .map(|b| SessionRef {
                id: b.session.clone(),
                tenant: b.tenant.clone(),
            })
    }

    /// The MCP session `mcp` ended (HTTP DELETE): close its workspace.
    pub(crate) async fn close_bound(&self, mcp: &str, tenant: Option<&str>) {
        let binding = {
            let mut bound = self.bound.lock().await;
            match bound.get(mcp) {
                Some(b) if b.tenant.as_deref() == tenant => bound.remove(mcp),
                _ => None,
            }
        };
        let Some(b) = binding else { return };
        self.forget_mounts(&b.session);
        let s = SessionRef {
            id: b.session,
            tenant: b.tenant,
        };
        match self.close(&s).await {
            Ok(()) => {
                tracing::info!(session = %s.tag(), "closed the workspace of a deleted MCP session")
            }
            Err(e) => {
                tracing::warn!(session = %s.tag(), error = %e, "closing a workspace failed")
            }
        }
    }

    /// Bytes of an earlier `mount_file` of the same url to the same path.
    pub(crate) fn mounted(&self, session: &str, url: &str, path: &str) -> Option<u64> {
        let key = (session.to_owned(), url.to_owned(), path.to_owned());
        self.lock_mounts().get(&key).copied()
    }

    pub(crate) fn remember_mount(&self, session: &str, url: &str, path: &str, bytes: u64) {
        let mut mounts = self.lock_mounts();
        // A path holds one file: an older url mounted there is gone.
        mounts.retain(|(s, _, p), _| !(s == session && p == path));
        mounts.insert((session.to_owned(), url.to_owned(), path.to_owned()), bytes);
    }

    pub(crate) fn forget_mount(&self, session: &str, url: &str, path: &str) {
        let key = (session.to_owned(), url.to_owned(), path.to_owned());
        self.lock_mounts().remove(&key);
    }

    fn forget_mounts(&self, session: &str) {
        self.lock_mounts().retain(|(s, _, _), _| s != session);
    }

    fn lock_mounts(&self) -> std::sync::MutexGuard<'_, HashMap<MountKey, u64>> {
        self.mounts.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What an agent is told of `what` (a session, an MCP session) of `node`,
/// a node that a router found down: why it cannot be reached, and
/// `start_over`, how to go on.
pub(crate) fn node_gone(what: &str, node: NodeId, start_over: &str) -> String {
    format!(
        "{what} lives on PRIMS node {} (its first four characters), which is down or gone: its \
         files and Python state cannot be reached. {start_over}; files you persisted with \
         persist_artifact are still in their storage.",
        node.0
    )
}
