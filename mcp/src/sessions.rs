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
use crate::supervisor::{error_code, Supervisor};
use prims_protocol::wire::ErrorCode;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Who is calling, from the HTTP request a tool call arrived on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Caller {
    pub tenant: Option<String>,
    /// The legacy `Mcp-Session-Id`, if the client has one.
    pub mcp_session: Option<String>,
}

impl Caller {
    pub fn from_parts(parts: Option<&http::request::Parts>) -> Caller {
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

#[derive(Debug, Clone)]
struct Binding {
    session: String,
    tenant: Option<String>,
}

type MountKey = (String, String, String);

pub struct Sessions {
    sup: Arc<Supervisor>,
    bound: tokio::sync::Mutex<HashMap<String, Binding>>,
    mounts: Mutex<HashMap<MountKey, u64>>,
}

fn gone(id: &str) -> ToolError {
    ToolError(format!(
        "Session {id} does not exist or has expired. Omit session_id to start a new session."
    ))
}

impl Sessions {
    pub fn new(sup: Arc<Supervisor>) -> Sessions {
        Sessions {
            sup,
            bound: Default::default(),
            mounts: Default::default(),
        }
    }

    /// The session a tool call uses (see the module docs).
    pub async fn resolve(
        &self,
        explicit: Option<&str>,
        caller: &Caller,
    ) -> Result<String, ToolError> {
        if let Some(id) = explicit.map(str::trim).filter(|s| !s.is_empty()) {
            self.check(id, caller.tenant.as_deref()).await?;
            return Ok(id.to_owned());
        }
        let Some(mcp) = caller.mcp_session.as_deref() else {
            let s = self.sup.open_session(caller.tenant.clone()).await?;
            tracing::debug!(session = %s.session_id, "opened a session for a stateless call");
            return Ok(s.session_id);
        };
        let existing = self.bound.lock().await.get(mcp).cloned();
        if let Some(b) = &existing {
            if b.tenant != caller.tenant {
                return Err(ToolError::new(
                    "This MCP session belongs to another client; initialize a new one.",
                ));
            }
            match self.sup.session_info(&b.session).await {
                Ok(_) => return Ok(b.session.clone()),
                Err(e) if error_code(&e) == Some(ErrorCode::NotFound) => {
                    tracing::info!(session = %b.session, "bound session expired; opening a new one");
                }
                Err(e) => return Err(e.into()),
            }
        }
        let mut bound = self.bound.lock().await;
        if let Some(now) = bound.get(mcp) {
            // Another call bound (or re-bound) it meanwhile.
            if existing.as_ref().map(|b| &b.session) != Some(&now.session) {
                return Ok(now.session.clone());
            }
        }
        let s = self.sup.open_session(caller.tenant.clone()).await?;
        tracing::debug!(session = %s.session_id, "opened a session for an MCP session");
        bound.insert(
            mcp.to_owned(),
            Binding {
                session: s.session_id.clone(),
                tenant: caller.tenant.clone(),
            },
        );
        Ok(s.session_id)
    }

    /// Fails unless session `id` exists and belongs to `tenant`; another
    /// tenant's session looks exactly like a missing one.
    pub async fn check(&self, id: &str, tenant: Option<&str>) -> Result<(), ToolError> {
        match self.sup.session_info(id).await {
            Ok(info) if info.tenant.as_deref() == tenant => Ok(()),
            Ok(_) => {
                tracing::warn!(session = id, ?tenant, "refused another tenant's session");
                Err(gone(id))
            }
            Err(e) if matches!(error_code(&e), Some(ErrorCode::NotFound)) => Err(gone(id)),
            Err(e) => Err(e.into()),
        }
    }

    /// The session bound to a legacy MCP session, if any, for `tenant`.
    pub async fn bound(&self, mcp: &str, tenant: Option<&str>) -> Option<String> {
        let bound = self.bound.lock().await;
        bound
            .get(mcp)
            .filter(|b| b.tenant.as_deref() == tenant)
            .map(|b| b.session.clone())
    }

    /// The MCP session `mcp` ended (HTTP DELETE): close its workspace.
    pub async fn close_bound(&self, mcp: &str, tenant: Option<&str>) {
        let binding = {
            let mut bound = self.bound.lock().await;
            match bound.get(mcp) {
                Some(b) if b.tenant.as_deref() == tenant => bound.remove(mcp),
                _ => None,
            }
        };
        let Some(b) = binding else { return };
        self.forget_mounts(&b.session);
        match self.sup.close_session(&b.session).await {
            Ok(()) => {
                tracing::info!(session = %b.session, "closed the workspace of a deleted MCP session")
            }
            Err(e) => {
                tracing::warn!(session = %b.session, error = %e, "closing a workspace failed")
            }
        }
    }

    /// Bytes of an earlier `mount_file` of the same url to the same path.
    pub fn mounted(&self, session: &str, url: &str, path: &str) -> Option<u64> {
        let key = (session.to_owned(), url.to_owned(), path.to_owned());
        self.lock_mounts().get(&key).copied()
    }

    pub fn remember_mount(&self, session: &str, url: &str, path: &str, bytes: u64) {
        let mut mounts = self.lock_mounts();
        // A path holds one file: an older url mounted there is gone.
        mounts.retain(|(s, _, p), _| !(s == session && p == path));
        mounts.insert((session.to_owned(), url.to_owned(), path.to_owned()), bytes);
    }

    pub fn forget_mount(&self, session: &str, url: &str, path: &str) {
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
