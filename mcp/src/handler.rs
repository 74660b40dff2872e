//! The MCP methods of [`PrimsServer`]: capabilities, tool calls (a
//! `run_code` becomes a task when the client takes tasks), tasks,
//! resources, subscriptions and the log level; and how a handler is made,
//! with the tool and prompt routers of [`crate::tools`] and
//! [`crate::prompt`].
#![allow(deprecated)] // MCP logging is deprecated by SEP-2577 but still what clients use.

use crate::server::{next_handler, PrimsServer};
use crate::state::AppState;
use crate::tools::shim::caller;
use crate::watch::{self, Sink};
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, GetTaskParams, GetTaskResult,
    Implementation, ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams,
    ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    ServerConfig, SetLevelRequestParams, SubscribeRequestParams, SubscriptionFilter,
    UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{prompt_handler, tool_handler, ErrorData as McpError, RoleServer, ServerHandler};
use std::sync::Arc;

const INSTRUCTIONS: &str = "PRIMS runs Python in a secure sandbox. Each session has one live \
Python interpreter, like a notebook kernel: variables, imports and functions from one run_code \
call are there in the next, and the value of a final expression comes back as result. Files \
written to output/ come back as artifacts. Keep the session_id of a result to reuse the \
session (its interpreter, files and mounts) in later calls. Use mount_file to bring a remote file in once, list_dir and preview_file to look \
around, persist_artifact to upload a result to a presigned URL.";

impl PrimsServer {
    pub(crate) fn new(app: Arc<AppState>) -> PrimsServer {
        PrimsServer {
            app,
            handler: next_handler(),
            log_level: Default::default(),
            tool_router: Self::tool_router(),
            prompt_router: Self::prompt_router(),
        }
    }

    /// A fresh handler sharing routers already built (what rmcp's factory calls).
    pub(crate) fn fresh(&self) -> PrimsServer {
        PrimsServer {
            app: self.app.clone(),
            handler: next_handler(),
            log_level: Default::default(),
            tool_router: self.tool_router.clone(),
            prompt_router: self.prompt_router.clone(),
        }
    }
}

#[tool_handler(router = self.tool_router)]
#[prompt_handler(router = self.prompt_router)]
impl ServerHandler for PrimsServer {
    fn get_info(&self) -> ServerConfig {
        let mut caps = ServerCapabilities::builder()
            .enable_tools()
            .enable_prompts()
            .enable_logging()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_tasks()
            .build();
        // MCP Apps: run_code names a view (crate::views).
        caps.extensions.get_or_insert_with(Default::default).insert(
            crate::views::EXTENSION_ID.into(),
            crate::views::capability(),
        );
        ServerConfig::new(caps)
            .with_server_info(Implementation::new("prims", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        // SEP-2663 tasks are server-directed from 2026-07-28 on; an older
        // client may declare the extension (the Inspector does) and still
        // expect the tool's own result.
        let modern =
            (context.protocol_version()).is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
        let tasks = modern
            && context
                .client_capabilities()
                .is_some_and(|c| c.supports_tasks());
        if tasks && request.name == "run_code" {
            let caller = caller(&context);
            return crate::tasks::start(&self.app, request, caller, context.ct.clone()).await;
        }
        let _call = InFlight::new(&self.app.calls);
        let tcc = ToolCallContext::new(self, request, context);
        self.tool_router.call(tcc).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        let task = crate::tasks::get(&self.app, &caller(&context), &request.task_id).await?;
        Ok(GetTaskResult::new(task))
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        crate::tasks::cancel(&self.app, &caller(&context), &request.task_id).await
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        self.resources_page(request, &caller(&context)).await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(self.templates())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        self.read(&request.uri, &caller(&context)).await
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let sink = Sink::Legacy {
            peer: context.peer.clone(),
            handler: self.handler,
        };
        self.watch(&request.uri, &caller(&context), sink).await
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.app.watch.remove_legacy(self.handler, &request.uri);
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(watch::accepted(requested))
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        self.listen_for_updates(context).await
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

/// Counts a tool call from its start to its answer.
struct InFlight<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> InFlight<'a> {
    fn new(n: &'a std::sync::atomic::AtomicUsize) -> Self {
        n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        InFlight(n)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}
