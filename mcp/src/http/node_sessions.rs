//! Legacy MCP sessions whose ids begin with this node's id, so a router
//! sends every request of an `Mcp-Session-Id` to the node that holds it (as
//! session ids do for `Mcp-Param-Session-Id`). rmcp's session manager
//! makes the ids; this wraps it, adding the prefix on the way out and
//! taking it off on the way in. An id of another node reaches this one
//! only when the router found that node down: [`refuse_foreign`] answers
//! it 404 (the protocol's "start a new session") with a body that says the
//! session's node is gone, never a new empty session in its place.

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::Stream;
use http::StatusCode;
use prims_protocol::node::NodeId;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::{EventStore, ServerSseMessage};
use rmcp::transport::streamable_http_server::{RestoreOutcome, SessionId, SessionManager};
use std::sync::Arc;

pub(crate) struct NodeSessions<M> {
    inner: M,
    /// `"{node}-"`: four hex digits and a dash.
    prefix: String,
}

impl<M> NodeSessions<M> {
    pub(crate) fn new(inner: M, node: NodeId) -> Self {
        NodeSessions {
            inner,
            prefix: format!("{node}-"),
        }
    }

    fn outer(&self, id: SessionId) -> SessionId {
        Arc::from(format!("{}{id}", self.prefix))
    }

    /// The inner id; an id of another node stays whole, which the inner
    /// manager has never issued, so it answers "not found".
    fn inner_id(&self, id: &SessionId) -> SessionId {
        match id.strip_prefix(self.prefix.as_str()) {
            Some(rest) => Arc::from(rest),
            None => id.clone(),
        }
    }
}

type SseStream = std::pin::Pin<Box<dyn Stream<Item = ServerSseMessage> + Send + Sync>>;

/// A stream the inner manager made, no longer tied to the id it was asked
/// with (it holds none: the trait bounds it `'static`).
fn boxed(s: impl Stream<Item = ServerSseMessage> + Send + Sync + 'static) -> SseStream {
    Box::pin(s)
}

impl<M: SessionManager> SessionManager for NodeSessions<M> {
    type Error = M::Error;
    type Transport = M::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let (id, transport) = self.inner.create_session().await?;
        Ok((self.outer(id), transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.inner
            .initialize_session(&self.inner_id(id), message)
            .await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner.has_session(&self.inner_id(id)).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.inner.close_session(&self.inner_id(id)).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let id = self.inner_id(id);
        Ok(boxed(self.inner.create_stream(&id, message).await?))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.inner.accept_message(&self.inner_id(id), message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let id = self.inner_id(id);
        Ok(boxed(self.inner.create_standalone_stream(&id).await?))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let id = self.inner_id(id);
        Ok(boxed(self.inner.resume(&id, last_event_id).await?))
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        self.inner.restore_session(self.inner_id(&id)).await
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.inner.event_store()
    }
}

/// 404 for a legacy `Mcp-Session-Id` that another node issued, with a
/// JSON-RPC error (the shape other MCP servers give a 404) that clients
/// which show the body pass on: the agent learns its workspace is gone.
pub(crate) async fn refuse_foreign(State(me): State<NodeId>, req: Request, next: Next) -> Response {
    let theirs = req
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .filter(|id| id.as_bytes().get(prims_protocol::node::NODE_HEX) == Some(&b'-'))
        .and_then(NodeId::of);
    match theirs {
        Some(theirs) if theirs != me => gone(theirs).into_response(),
        _ => next.run(req).await,
    }
}

fn gone(node: NodeId) -> impl IntoResponse {
    let message = crate::sessions::node_gone(
        &format!("MCP session {node}-\u{2026}"),
        node,
        "Start a new MCP session",
    );
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "error": { "code": -32001, "message": message },
        "id": null,
    });
    (StatusCode::NOT_FOUND, axum::Json(body))
}
