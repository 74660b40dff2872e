//! The MCP handler value. rmcp makes one per legacy session (and one per
//! stateless request); they share the [`AppState`]. The modules above add
//! its methods: the tools ([`crate::tools`]), the prompt
//! ([`crate::prompt`]), the resources ([`crate::resources`]), and its MCP
//! methods and constructors ([`crate::handler`]).

#![allow(deprecated)] // MCP logging is deprecated by SEP-2577 but still what clients use.

use crate::state::AppState;
use rmcp::handler::server::router::prompt::PromptRouter;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::LoggingLevel;
use std::sync::{Arc, Mutex};

/// Tells one handler (one legacy MCP session) from another.
static HANDLERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

pub(crate) fn next_handler() -> u64 {
    HANDLERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

#[derive(Clone)]
pub(crate) struct PrimsServer {
    pub(crate) app: Arc<AppState>,
    /// For this handler's resource subscriptions.
    pub(crate) handler: u64,
    /// Set by a legacy client's `logging/setLevel`.
    pub(crate) log_level: Arc<Mutex<Option<LoggingLevel>>>,
    pub(crate) tool_router: ToolRouter<PrimsServer>,
    pub(crate) prompt_router: PromptRouter<PrimsServer>,
}

impl PrimsServer {
    pub(crate) fn log_level(&self) -> Option<LoggingLevel> {
        *self.log_level.lock().unwrap_or_else(|e| e.into_inner())
    }
}
