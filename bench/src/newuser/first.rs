//! Phase 1: the first call a new user makes, right after `/health` first
//! answers 200, with the notifications it brought and when the base
//! environment became ready (`/health` status `ok`) meanwhile.

use super::node::{ms, print_1, server_ms, status, Node, Startup};
use crate::mcp::connect_pooled;
use anyhow::Result;
use rmcp::model::ProgressNotificationParam;
use rmcp::service::NotificationContext;
use rmcp::{ClientHandler, RoleClient};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// An MCP client that keeps the notifications it gets, each with the ms
/// since `since`.
#[derive(Clone)]
struct Notes {
    since: Instant,
    seen: Arc<Mutex<Vec<(f64, String)>>>,
}

impl Notes {
    fn push(&self, what: String) {
        if let Ok(mut seen) = self.seen.lock() {
            seen.push((ms(self.since), what));
        }
    }
}

impl ClientHandler for Notes {
    async fn on_progress(&self, p: ProgressNotificationParam, _: NotificationContext<RoleClient>) {
        self.push(format!(
            "progress {} {:?}",
            p.progress,
            p.message.unwrap_or_default()
        ));
    }

    #[allow(deprecated)] // MCP logging is deprecated, but what the server sends.
    async fn on_logging_message(
        &self,
        p: rmcp::model::LoggingMessageNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        self.push(format!("log {:?} {}", p.level, p.data));
    }
}

#[derive(Debug)]
pub(super) struct FirstCall {
    pub startup: Startup,
    /// From the process start until `/health` first said `ok` (the base
    /// environment built, or with a readiness-gated `/health` all a first
    /// call needs up), if it did while the call ran.
    pub base_env_ms: Option<f64>,
    pub init_ms: f64,
    pub call_ms: f64,
    /// The call's `duration_ms`.
    pub server_ms: Option<f64>,
    /// The call's notifications, at ms since the initialize began.
    pub notes: Vec<(f64, String)>,
}

/// Opens a session and runs `print(1)` at once, while another task polls
/// `/health` until its status is `ok`.
pub(super) async fn first_call(node: &Node, startup: Startup) -> Result<FirstCall> {
    let started = startup.started;
    let watch = async {
        loop {
            if node.health().await.is_some_and(|b| status(&b) == "ok") {
                return ms(started);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let call = async {
        let notes = Notes {
            since: Instant::now(),
            seen: Arc::default(),
        };
        let t = Instant::now();
        let c = connect_pooled(&node.url, node.http.clone(), notes.clone()).await?;
        let init_ms = ms(t);
        let (call_ms, v) = print_1(&c).await?;
        let _ = c.cancel().await;
        let seen = notes.seen.lock().map(|s| s.clone()).unwrap_or_default();
        Ok::<_, anyhow::Error>((init_ms, call_ms, server_ms(&v), seen))
    };
    // A call that returned waited for the base environment: `/health`
    // says `ok` by then, or within the next poll or two.
    tokio::pin!(watch, call);
    let (base_env_ms, result) = tokio::select! {
        at = &mut watch => (Some(at), (&mut call).await),
        r = &mut call => (tokio::time::timeout(Duration::from_secs(5), &mut watch).await.ok(), r),
    };
    let (init_ms, call_ms, server_ms, notes) = result?;
    Ok(FirstCall {
        startup,
        base_env_ms,
        init_ms,
        call_ms,
        server_ms,
        notes,
    })
}
