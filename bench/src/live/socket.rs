//! The same cells through the supervisor socket, the way the front-end
//! sends them, so the tables show what MCP over HTTP adds to a live call.

use super::cell::{Cell, Expect};
use super::supervisor::Supervisor;
use anyhow::{bail, Result};
use prims_protocol::jail::{LimitRequest, Status};
use prims_protocol::wire::{InterpreterState, ResetReason, RunRequest};
use std::time::Instant;

/// A session opened on the supervisor socket (from the warm pool).
pub(crate) struct SocketSession<'a> {
    sup: &'a Supervisor,
    id: String,
}

impl<'a> SocketSession<'a> {
    /// A new session whose first call runs `cell`.
    pub async fn open(sup: &'a Supervisor, cell: Cell) -> Result<SocketSession<'a>> {
        let id = sup.client().open_session(None).await?.session_id;
        let s = SocketSession { sup, id };
        s.run(cell, Expect::FirstCall).await?;
        Ok(s)
    }

    /// Runs `cell`; fails unless its output and interpreter are as expected.
    pub async fn run(&self, cell: Cell, expect: Expect) -> Result<f64> {
        let req = RunRequest {
            session_id: self.id.clone(),
            tenant: None,
            code: cell.code.into(),
            requirements: vec![],
            limits: LimitRequest::default(),
            fresh: false,
            network: None,
        };
        let t = Instant::now();
        let reply = self.sup.client().run(req, |_| {}).await?;
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        let it = &reply.interpreter;
        let want = match expect {
            Expect::Kept => (InterpreterState::Kept, None),
            Expect::FirstCall => (InterpreterState::New, Some(ResetReason::FirstCall)),
            Expect::FreshRequested => (InterpreterState::Reset, Some(ResetReason::FreshRequested)),
        };
        if reply.outcome.status != Status::Ok
            || reply.stdout != cell.stdout.as_bytes()
            || !reply.stderr.is_empty()
            || (it.state, it.reason) != want
        {
            bail!(
                "socket run of `{}` (expecting {expect:?}) answered unexpectedly: {reply:?}",
                cell.code
            );
        }
        Ok(ms)
    }

    pub async fn close(self) -> Result<()> {
        Ok(self.sup.client().close_session(&self.id, None).await?)
    }
}
