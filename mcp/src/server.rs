//! The MCP handler. rmcp makes one per legacy session (and one per
//! stateless request); they share the [`AppState`].
#![allow(deprecated)] // MCP logging is deprecated by SEP-2577 but still what clients use.

use crate::egress::Egress;
use crate::error::ToolError;
use crate::metrics::Metrics;
use crate::pool::SupervisorPool;
use crate::sessions::Sessions;
use prims_policy::Policy;
use rmcp::handler::server::router::prompt::PromptRouter;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{
    Implementation, LoggingLevel, ServerCapabilities, ServerConfig, SetLevelRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::{prompt_handler, tool_handler, ErrorData as McpError, RoleServer, ServerHandler};
use std::sync::{Arc, Mutex};

const INSTRUCTIONS: &str = "PRIMS runs Python in a secure sandbox. Each session has one live \
Python interpreter, like a notebook kernel: variables, imports and functions from one run_code \
call are there in the next, and the value of a final expression comes back as result. Files \
written to output/ come back as artifacts. Keep the session_id of a result to reuse the \
session (its interpreter, files and mounts) in later calls. Use mount_file to bring a remote file in once, list_dir and preview_file to look \
around, persist_artifact to upload a result to a presigned URL.";

/// What every handler shares.
pub struct AppState {
    pub sup: Arc<SupervisorPool>,
    pub sessions: Sessions,
    pub policy: Policy,
    pub metrics: Metrics,
    egress: Result<Egress, String>,
}

impl AppState {
    pub fn new(socket: std::path::PathBuf, policy: Policy) -> AppState {
        let sup = Arc::new(SupervisorPool::new(socket));
        let egress = Egress::new(&policy.egress).map_err(|e| e.to_string());
        if let Err(e) = &egress {
            tracing::error!(error = %e, "outbound HTTP is unavailable");
        }
        AppState {
            sessions: Sessions::new(sup.clone()),
            sup,
            policy,
            metrics: Metrics::default(),
            egress,
        }
    }

    pub fn egress(&self) -> Result<&Egress, ToolError> {
        self.egress.as_ref().map_err(|e| {
            ToolError(format!(
                "Outbound HTTP is not available on this server ({e}); ask its operator."
            ))
        })
    }
}

#[derive(Clone)]
pub struct PrimsServer {
    pub(crate) app: Arc<AppState>,
    /// Set by a legacy client's `logging/setLevel`.
    log_level: Arc<Mutex<Option<LoggingLevel>>>,
    tool_router: ToolRouter<PrimsServer>,
    prompt_router: PromptRouter<PrimsServer>,
}

impl PrimsServer {
    pub fn new(app: Arc<AppState>) -> PrimsServer {
        PrimsServer {
            app,
            log_level: Default::default(),
            tool_router: Self::tool_router(),
            prompt_router: Self::prompt_router(),
        }
    }

    /// A fresh handler sharing routers already built (what rmcp's factory calls).
    pub fn fresh(&self) -> PrimsServer {
        PrimsServer {
            app: self.app.clone(),
            log_level: Default::default(),
            tool_router: self.tool_router.clone(),
            prompt_router: self.prompt_router.clone(),
        }
    }

    pub(crate) fn log_level(&self) -> Option<LoggingLevel> {
        *self.log_level.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[tool_handler(router = self.tool_router)]
#[prompt_handler(router = self.prompt_router)]
impl ServerHandler for PrimsServer {
    fn get_info(&self) -> ServerConfig {
        let caps = ServerCapabilities::builder()
            .enable_tools()
            .enable_prompts()
            .enable_logging()
            .build();
        ServerConfig::new(caps)
            .with_server_info(Implementation::new("prims", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        *self.log_level.lock().unwrap_or_else(|e| e.into_inner()) = Some(request.level);
        Ok(())
    }
}
