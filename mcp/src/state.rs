//! What every MCP handler shares: the supervisor connections, the session
//! map, the policy, the metrics, the resource watchers and outbound HTTP.

use crate::egress::Egress;
use crate::error::ToolError;
use crate::metrics::Metrics;
use crate::pool::SupervisorPool;
use crate::sessions::Sessions;
use crate::watch::Watch;
use prims_policy::Policy;
use prims_protocol::node::NodeId;
use std::sync::Arc;

/// What every handler shares.
pub(crate) struct AppState {
    pub(crate) sup: Arc<SupervisorPool>,
    pub(crate) sessions: Sessions,
    pub(crate) policy: Policy,
    pub(crate) metrics: Metrics,
    /// Who is subscribed to which workspace file.
    pub(crate) watch: Watch,
    egress: Result<Egress, String>,
    /// The supervisor drains (see [`crate::http::drain`]).
    pub(crate) draining: std::sync::atomic::AtomicBool,
    /// Tool calls being answered: a stopping front-end waits for them.
    pub(crate) calls: std::sync::atomic::AtomicUsize,
}

impl AppState {
    pub(crate) fn new(
        socket: std::path::PathBuf,
        policy: Policy,
        node: Option<NodeId>,
    ) -> AppState {
        let sup = Arc::new(SupervisorPool::new(socket));
        let egress = Egress::new(&policy.egress).map_err(|e| e.to_string());
        if let Err(e) = &egress {
            tracing::error!(error = %e, "outbound HTTP is unavailable");
        }
        AppState {
            sessions: Sessions::new(sup.clone(), node),
            sup,
            policy,
            metrics: Metrics::default(),
            watch: Default::default(),
            egress,
            draining: Default::default(),
            calls: Default::default(),
        }
    }

    pub(crate) fn egress(&self) -> Result<&Egress, ToolError> {
        self.egress.as_ref().map_err(|e| {
            ToolError(format!(
                "Outbound HTTP is not available on this server ({e}); ask its operator."
            ))
        })
    }
}
