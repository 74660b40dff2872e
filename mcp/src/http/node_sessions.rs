//! Legacy MCP sessions whose ids begin with this node's id, so a router
//! sends every request of an `Mcp-Session-Id` to the node that holds it (as
//! session ids do for `Mcp-Param-Session-Id`). rmcp's session manager
//! makes the ids; this wraps it, adding the prefix on the way out and
//! taking it off on the way in. An id without this node's prefix reaches
//! no session, so the client gets rmcp's 404 and starts a new one.

use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::{EventStore, ServerSseMessage};
use rmcp::transport::streamable_http_server::{RestoreOutcome, SessionId, SessionManager};
use std::sync::Arc;

pub struct NodeSessions<M> {
    inner: M,
    /// `"{node}-"`: four hex digits and a dash.
    prefix: String,
}

impl<M> NodeSessions<M> {
    pub fn new(inner: M, node: prims_protocol::node::NodeId) -> Self {
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
