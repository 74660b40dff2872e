//! `fork_session`, `checkpoint_session` and `restore_checkpoint`: the
//! supervisor does the work (see its `daemon::branch`); these shape the
//! results for a model.

use super::branch_types::*;
use crate::error::ToolError;
use crate::sessions::SessionRef;
use crate::state::AppState;
use prims_protocol::wire::NotRestored;
use std::collections::BTreeMap;

pub(crate) async fn fork_session(
    app: &AppState,
    s: &SessionRef,
    count: Option<u32>,
) -> Result<ForkSessionOutput, ToolError> {
    let c = app.sup.client().await?;
    let f = c
        .fork_session(&s.id, s.tenant.as_deref(), count.unwrap_or(1))
        .await?;
    Ok(ForkSessionOutput {
        sessions: f
            .sessions
            .into_iter()
            .map(|b| BranchOut {
                session_id: b.session_id,
                restored: b.restored,
                not_restored: by_name(b.not_restored),
            })
            .collect(),
        duration_ms: f.duration_ms,
        source_paused_ms: f.source_paused_ms,
    })
}

pub(crate) async fn checkpoint_session(
    app: &AppState,
    s: &SessionRef,
    label: Option<&str>,
) -> Result<CheckpointSessionOutput, ToolError> {
    let c = app.sup.client().await?;
    let k = c.checkpoint(&s.id, s.tenant.as_deref(), label).await?;
    Ok(CheckpointSessionOutput {
        checkpoint_id: k.checkpoint_id,
        label: k.label,
        bytes: k.bytes,
        not_saved: by_name(k.not_saved),
        paused_ms: k.paused_ms,
        session_id: s.id.clone(),
    })
}

pub(crate) async fn restore_checkpoint(
    app: &AppState,
    s: &SessionRef,
    checkpoint_id: &str,
) -> Result<RestoreCheckpointOutput, ToolError> {
    let c = app.sup.client().await?;
    let r = c
        .restore_checkpoint(&s.id, s.tenant.as_deref(), checkpoint_id)
        .await?;
    Ok(RestoreCheckpointOutput {
        restored: r.restored,
        not_restored: by_name(r.not_restored),
        duration_ms: r.duration_ms,
        session_id: s.id.clone(),
    })
}

/// `name: why` pairs as an object, as a model reads them best.
fn by_name(v: Vec<NotRestored>) -> BTreeMap<String, String> {
    v.into_iter().map(|n| (n.name, n.why)).collect()
}
