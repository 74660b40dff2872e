//! The MCP resource methods of [`PrimsServer`], on top of [`super::list`],
//! [`super::read`] and [`crate::watch`].

use super::read::ReadError;
use crate::error::ToolError;
use crate::server::PrimsServer;
use crate::sessions::Caller;
use crate::uri::{parse, TEMPLATE};
use crate::watch::{Arrived, Sink};
use rmcp::model::{
    CacheScope, ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams,
    ReadResourceResponse, ReadResourceResult, ResourceTemplate,
};
use rmcp::service::SubscriptionContext;
use rmcp::ErrorData as McpError;

/// The notebook of a session (`crate::notebook`).
const NOTEBOOK_TEMPLATE: &str = "prims://sessions/{session_id}/notebook.ipynb";
const CHECKPOINTS_TEMPLATE: &str = "prims://sessions/{session_id}/checkpoints";
/// The resource template never changes while a server runs.
const TEMPLATE_TTL_MS: u64 = 3_600_000;

impl PrimsServer {
    /// The files of the caller's current session: the workspace bound to
    /// its legacy MCP session. A stateless caller has none (it names
    /// sessions explicitly, through the template); nor does a session
    /// that has not run anything yet.
    pub(crate) async fn resources_page(
        &self,
        request: Option<PaginatedRequestParams>,
        caller: &Caller,
    ) -> Result<ListResourcesResult, McpError> {
        let cursor = request.and_then(|r| r.cursor);
        let current = match caller.mcp_session.as_deref() {
            Some(mcp) => {
                (self.app.sessions)
                    .bound(mcp, caller.tenant.as_deref())
                    .await
            }
            None => None,
        };
        let mut out = ListResourcesResult {
            cache_scope: Some(CacheScope::Private),
            ttl_ms: Some(0),
            ..Default::default()
        };
        if cursor.is_none() {
            // The MCP App views, which every caller may read.
            out.resources = crate::views::listed();
        }
        let Some(s) = current else {
            return Ok(out);
        };
        let page = super::list::page(&self.app, &s, cursor.as_deref())
            .await
            .map_err(|e| McpError::invalid_params(e.0, None))?;
        out.resources.extend(page.resources);
        out.next_cursor = page.next_cursor;
        Ok(out)
    }

    pub(crate) fn templates(&self) -> ListResourceTemplatesResult {
        let t = ResourceTemplate::new(TEMPLATE, "workspace-file")
            .with_title("A file of a PRIMS session's workspace")
            .with_description(
                "Any file of a session's workspace: output/ (what the code wrote), mounts/ \
                 (downloaded inputs) and the rest. session_id is the one tool results return; \
                 path is relative to the workspace root, e.g. output/plot.png.",
            );
        let nb = ResourceTemplate::new(NOTEBOOK_TEMPLATE, "session-notebook")
            .with_title("A PRIMS session's runs as a Jupyter notebook")
            .with_description(
                "Every run_code of the session (within the history's bounds) as a cell of an \
                 nbformat 4.5 notebook, with its outputs; it opens in Jupyter and re-runs top \
                 to bottom. session_id is the one tool results return.",
            )
            .with_mime_type(crate::notebook::NOTEBOOK_MIME);
        let ck = ResourceTemplate::new(CHECKPOINTS_TEMPLATE, "session-checkpoints")
            .with_title("A PRIMS session's checkpoints")
            .with_description(
                "The checkpoints checkpoint_session took of the session, oldest first, as JSON: \
                 checkpoint_id, label, created (Unix seconds), bytes and not_saved of each. \
                 session_id is the one tool results return.",
            )
            .with_mime_type("application/json");
        ListResourceTemplatesResult {
            resource_templates: vec![nb, ck, t],
            cache_scope: Some(CacheScope::Public),
            ttl_ms: Some(TEMPLATE_TTL_MS),
            ..Default::default()
        }
    }

    pub(crate) async fn read(
        &self,
        uri: &str,
        caller: &Caller,
    ) -> Result<ReadResourceResponse, McpError> {
        let data = Some(serde_json::json!({ "uri": uri }));
        match super::read::read(&self.app, caller, uri).await {
            Ok(contents) => Ok(ReadResourceResult::new(vec![contents])
                .with_cache_scope(CacheScope::Private)
                .with_ttl_ms(0)
                .into()),
            // SEP-2164: the error names the URI it was about.
            Err(ReadError::NotFound(why)) => Err(McpError::resource_not_found(why, data)),
            Err(ReadError::Other(e)) => Err(McpError::invalid_params(e.0, data)),
        }
    }

    /// Watch `uri` for `sink`, after the same checks as a read.
    pub(crate) async fn watch(
        &self,
        uri: &str,
        caller: &Caller,
        sink: Sink,
    ) -> Result<(), McpError> {
        let (session_id, path) = parse(uri).map_err(|e| McpError::invalid_params(e.0, None))?;
        let s = (self.app.sessions.resolve(Some(&session_id), caller).await)
            .map_err(|e: ToolError| McpError::resource_not_found(e.0, None))?;
        (self
            .app
            .watch
            .add(&self.app.sup, &s, uri, &path, sink)
            .await)
            .map_err(|e| McpError::invalid_params(e.to_string(), None))
    }

    /// A 2026-07-28 `subscriptions/listen`: watch the accepted URIs until
    /// the client closes the request. URIs the caller may not see are
    /// watched by no one, which tells nothing about whether they exist.
    pub(crate) async fn listen_for_updates(
        &self,
        context: SubscriptionContext,
    ) -> Result<(), McpError> {
        let parts = context
            .request_context()
            .extensions
            .get::<http::request::Parts>();
        let caller = Caller::from_parts(parts);
        // Every /mcp request is stamped; without one, catch up on all.
        let arrived =
            (parts.and_then(|p| p.extensions.get::<Arrived>()).copied()).unwrap_or(Arrived(0));
        let id = crate::server::next_handler();
        let uris = context
            .accepted()
            .resource_subscriptions
            .clone()
            .unwrap_or_default();
        for uri in uris {
            let sink = Sink::Listen {
                sink: context.sink().clone(),
                listen: id,
            };
            if let Err(e) = self.watch(&uri, &caller, sink).await {
                tracing::debug!(error = %e.message, "a listened resource is not watched");
            }
        }
        self.app.watch.catch_up(id, arrived).await;
        context.cancelled().await;
        self.app.watch.remove_owner(false, id);
        Ok(())
    }
}
