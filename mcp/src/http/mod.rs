//! The HTTP server: `/mcp` (rmcp streamable HTTP, both protocol eras),
//! `/artifacts/<path>`, `/sessions/<id>/notebook.ipynb`, `/metrics` and `/health`, behind the Host/Origin
//! check; all but `/health` and `/health/live` also behind the bearer-token
//! check (probes and routers that carry no token need those two).

mod artifacts;
mod drain;
mod health;
mod node_sessions;
mod notebook;
mod origin;

use crate::auth::{self, Auth, Tenant};
use crate::config::FrontendConfig;
use crate::server::PrimsServer;
use crate::state::AppState;
use axum::extract::{Request, State};
use axum::middleware::{from_fn_with_state, Next};
use axum::response::Response;
use axum::routing::get;
use axum::serve::ListenerExt;
use axum::Router;
use node_sessions::NodeSessions;
use prims_policy::Policy;
use prims_protocol::node::NodeId;
use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, SessionConfig};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long a legacy MCP session may sit idle beyond the workspace's own
/// idle TTL (rmcp's default of 300 s would end live sessions).
const KEEP_ALIVE_MARGIN: Duration = Duration::from_secs(60);
/// Time given to open connections after a shutdown request.
const DRAIN: Duration = Duration::from_secs(5);

pub struct FrontendOptions {
    /// The supervisor's Unix socket.
    pub socket: PathBuf,
    pub policy: Policy,
    pub config: FrontendConfig,
    /// The address the listener is bound to (for the Host allow-list).
    pub listen: SocketAddr,
    /// In a cluster, this node's id: legacy MCP session ids begin with it,
    /// as session ids do.
    pub node: Option<NodeId>,
}

#[derive(Debug, thiserror::Error)]
pub enum FrontendError {
    #[error("serving HTTP: {0}")]
    Serve(#[source] std::io::Error),
}

/// The whole HTTP application.
fn router(opts: &FrontendOptions, app: Arc<AppState>, services: &CancellationToken) -> Router {
    let mut session_config = SessionConfig::default();
    session_config.keep_alive = Some(opts.policy.sessions.idle_ttl.get() + KEEP_ALIVE_MARGIN);
    let mut manager = LocalSessionManager::default();
    manager.session_config = session_config;
    let origins = opts.config.origins();
    let hosts = opts.config.hosts(&opts.listen);
    let cfg = StreamableHttpServerConfig::default()
        .with_allowed_origins(origins.clone())
        .with_allowed_hosts(hosts.clone())
        .with_sse_keep_alive(Some(Duration::from_secs(15)))
        // 2026-07-28 answers with nothing streamed before them go out as
        // plain JSON: no SSE framing, and rmcp 3.11's client caches the
        // tools' x-mcp-header annotations from a tools/list it gets as JSON,
        // but not always from one it gets as SSE (then it omits
        // Mcp-Param-Session-Id and the call fails -32020). Legacy MCP
        // sessions are unaffected.
        .with_json_response(true)
        .with_cancellation_token(services.child_token());
    let proto = PrimsServer::new(app.clone());
    let factory = move || Ok(proto.fresh());
    let mcp = match opts.node {
        Some(node) => Router::new()
            .nest_service(
                "/mcp",
                StreamableHttpService::new(
                    factory,
                    Arc::new(NodeSessions::new(manager, node)),
                    cfg,
                ),
            )
            .layer(from_fn_with_state(node, node_sessions::refuse_foreign)),
        None => Router::new().nest_service(
            "/mcp",
            StreamableHttpService::new(factory, Arc::new(manager), cfg),
        ),
    };

    let auth = Arc::new(Auth::new(opts.config.tokens.clone()));
    let authed = mcp
        .layer(from_fn_with_state(app.clone(), stamp_arrival))
        .layer(from_fn_with_state(app.clone(), drain::refuse_new_sessions))
        .layer(from_fn_with_state(app.clone(), on_delete))
        .merge(
            Router::new()
                .route("/artifacts/{*path}", get(artifacts::get))
                .route("/sessions/{session_id}/notebook.ipynb", get(notebook::get))
                // Any configured token reads the metrics: they are counts
                // for the whole node, with no tenant, session or code in
                // them, and a scraper gets a token of its own.
                .route("/metrics", get(health::metrics))
                .with_state(app.clone()),
        )
        .layer(from_fn_with_state(auth, auth::authenticate));
    let public = Router::new()
        .route("/health", get(health::health))
        .route("/health/live", get(health::live))
        .with_state(app);
    let allowed = Arc::new(origin::HostOriginCheck::new(hosts, origins));
    authed
        .merge(public)
        .layer(from_fn_with_state(allowed, origin::check))
}

/// When the request arrived, for a `subscriptions/listen` to catch up on
/// the runs that end before its watches are registered.
async fn stamp_arrival(State(app): State<Arc<AppState>>, mut req: Request, next: Next) -> Response {
    req.extensions_mut().insert(app.watch.stamp());
    next.run(req).await
}

/// A successful HTTP DELETE of a legacy MCP session closes its workspace,
/// and answers 204: rmcp says 202, which the Python SDK reports as a failed
/// termination on every close.
async fn on_delete(State(app): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let ended = (req.method() == http::Method::DELETE)
        .then(|| {
            let mcp = req
                .headers()
                .get("mcp-session-id")?
                .to_str()
                .ok()?
                .to_owned();
            let tenant = req.extensions().get::<Tenant>().and_then(|t| t.0.clone());
            Some((mcp, tenant))
        })
        .flatten();
    let mut resp = next.run(req).await;
    if let Some((mcp, tenant)) = ended {
        if resp.status().is_success() {
            app.sessions.close_bound(&mcp, tenant.as_deref()).await;
            *resp.status_mut() = http::StatusCode::NO_CONTENT;
            *resp.body_mut() = axum::body::Body::empty();
        }
    }
    resp
}

/// How long a stopping front-end waits for the tool calls under way.
const CALLS_GRACE: Duration = Duration::from_secs(40);

/// Once `shutdown` comes (no new connection is accepted from then on),
/// waits for the tool calls under way to be answered, at most
/// CALLS_GRACE, then ends the MCP sessions.
async fn end_services(
    app: Arc<AppState>,
    shutdown: CancellationToken,
    services: CancellationToken,
) {
    use std::sync::atomic::Ordering::Relaxed;
    shutdown.cancelled().await;
    let deadline = tokio::time::Instant::now() + CALLS_GRACE;
    while app.calls.load(Relaxed) > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let left = app.calls.load(Relaxed);
    if left > 0 {
        tracing::warn!(
            left,
            "tool calls still unanswered when the front-end stopped"
        );
    }
    services.cancel();
}

/// Serve on `listener` until `shutdown` is cancelled.
pub async fn serve(
    listener: tokio::net::TcpListener,
    opts: FrontendOptions,
    shutdown: CancellationToken,
) -> Result<(), FrontendError> {
    let app = Arc::new(AppState::new(
        opts.socket.clone(),
        opts.policy.clone(),
        opts.node,
    ));
    tokio::spawn(drain::watch(app.clone(), shutdown.clone()));
    // The MCP sessions end only once the tool calls under way have their
    // answers (a stopping supervisor interrupts its running calls and
    // answers them), or after CALLS_GRACE: a shutdown must not cancel a
    // call whose answer is on its way.
    let services = CancellationToken::new();
    tokio::spawn(end_services(
        app.clone(),
        shutdown.clone(),
        services.clone(),
    ));
    let router = router(&opts, app, &services);
    let stop = shutdown.clone();
    // A response streams as several small writes (headers, events, the last
    // chunk): with Nagle's algorithm a kept-alive client's delayed ACK holds
    // each one back for 40 ms.
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!("TCP_NODELAY on an accepted connection: {e}");
        }
    });
    let server = axum::serve(listener, router).with_graceful_shutdown(async move {
        stop.cancelled().await;
    });
    let drained = async {
        services.cancelled().await;
        tokio::time::sleep(DRAIN).await;
    };
    tokio::select! {
        r = server => r.map_err(FrontendError::Serve),
        _ = drained => {
            tracing::warn!("connections still open after {DRAIN:?}; stopping anyway");
            Ok(())
        }
    }
}
