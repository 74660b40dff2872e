//! The tools: the original five, and the three that branch a session. Each goes through one shim (`shim.rs`): it resolves the
//! caller's workspace, does its work through the supervisor (and egress),
//! and returns `structuredContent` with a JSON text mirror, or an `isError`
//! result a model can act on.

mod branch;
pub(crate) mod branch_types;
mod files;
mod images;
mod mount;
mod outputs;
mod persist;
pub(crate) mod run_code;
pub(crate) mod shim;
pub(crate) mod types;

use crate::server::PrimsServer;
use crate::streaming::Streamer;
use branch_types::*;
use rmcp::handler::server::common::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router, ErrorData as McpError, RoleServer};
use shim::{caller, plain, until_cancelled};
use types::*;

const RUN_CODE: &str = "Run Python in an isolated sandbox (a Linux jail with no network) and \
return its stdout, stderr, status and the files it wrote. Calls of one session share one live \
IPython interpreter, like notebook cells: variables, imports and functions defined by one call \
are there in the next (state: kept), and magics (%time, %%capture, !ls), display() and a \
trailing ; work as in Jupyter. If the code ends with an expression, its value comes back as \
result; every display() and matplotlib figure (plt.show(), or one left open) comes back in \
outputs as mime bundles, figures also as images and as files under output/figures/. An \
exception fails the call (status error, traceback in stderr) but keeps the state. \
The state is lost when a call times out and does not stop when interrupted, runs out of \
memory, or exits the interpreter; fresh: true starts over on purpose. Requirements \
accumulate: a call that leaves them out keeps the session's packages, and new ones (or \
%pip install in a cell) are installed into the session with the state kept; only a version \
that conflicts with one the session has starts a new interpreter \
(state_reason requirements_conflict). An interpreter idle for long is stopped and its picklable variables \
restored on the next call (state and state_reason say which). Pass the session_id from an \
earlier result (or reuse this MCP connection) to continue a session. Files written under \
output/ come back as artifacts (PNG/JPEG plots also as images) and can be downloaded from \
/artifacts/<relative_path>. Optional: requirements (pip specifiers), files \
[{url, mountPath}] downloaded to mounts/<mountPath> (read-only) before the run, timeout_s to \
lower the time limit.";

const FORK_SESSION: &str = "Branch a session into count new sessions (1 by default), each \
with its own copy of the source's workspace files and variables (functions, classes and \
lambdas defined in cells included), to try several approaches from the same state: run_code \
with a branch's session_id works in that branch, and no branch sees another's changes or the \
source's. Waits for a call running in the source, which is paused only while its variables \
are saved and its files copied (source_paused_ms). Returns sessions: [{session_id, restored, \
not_restored (name: why)}] and duration_ms. A branch left unused expires like any session.";

#[tool_router(router = tool_router, vis = "pub(crate)")]
impl PrimsServer {
    #[tool(
        description = RUN_CODE,
        output_schema = schema_for_output::<RunCodeOutput>(),
        meta = crate::views::run_code_meta(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = true)
    )]
    async fn run_code(
        &self,
        Parameters(p): Parameters<RunCodeParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        if let Err(e) = run_code::check_size(&p.code) {
            return Ok(self.finish::<RunCodeOutput>("run_code", None, Err(e)));
        }
        let explicit = p.session_id.clone();
        self.in_session("run_code", explicit, caller(&ctx), |s| async move {
            let level = ctx.meta.log_level().or_else(|| self.log_level());
            let streamer = Streamer::new(ctx.peer.clone(), ctx.meta.get_progress_token(), level);
            run_code::run_code(&self.app, &s, p, ctx.ct.clone(), streamer).await
        })
        .await
    }

    #[tool(
        description = "List a directory of the session workspace (relative to its root; \".\" by default): name, path, type, size and modification time of each entry, sorted by name.",
        output_schema = schema_for_output::<ListDirOutput>(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn list_dir(
        &self,
        Parameters(p): Parameters<ListDirParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let explicit = p.session_id.clone();
        self.in_session("list_dir", explicit, caller(&ctx), |s| async move {
            plain(files::list_dir(&self.app, &s, &p.dir_path).await)
        })
        .await
    }

    #[tool(
        description = "Show the first 8192 bytes of a workspace file as text (path relative to the workspace root, e.g. output/result.csv). Binary files are described, not dumped.",
        output_schema = schema_for_output::<PreviewFileOutput>(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn preview_file(
        &self,
        Parameters(p): Parameters<PreviewFileParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let explicit = p.session_id.clone();
        self.in_session("preview_file", explicit, caller(&ctx), |s| async move {
            plain(files::preview_file(&self.app, &s, &p.relative_path).await)
        })
        .await
    }

    #[tool(
        description = "Download a file from an http(s) URL into mounts/<mount_path> of the session workspace (read-only for the code; read it as e.g. pd.read_csv('mounts/data.csv')). The same url and path is downloaded only once per session.",
        output_schema = schema_for_output::<MountFileOutput>(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = true)
    )]
    async fn mount_file(
        &self,
        Parameters(p): Parameters<MountFileParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let explicit = p.session_id.clone();
        self.in_session("mount_file", explicit, caller(&ctx), |s| async move {
            let mount = mount::mount_file(&self.app, &s, &p.url, &p.mount_path);
            plain(until_cancelled(&ctx.ct, mount).await)
        })
        .await
    }

    #[tool(
        description = "Upload a file from output/ of the session workspace (relative_path is relative to output/; an artifact's relative_path from run_code works too) to a presigned URL with an HTTP PUT. Returns the bytes uploaded and the HTTP status.",
        output_schema = schema_for_output::<PersistArtifactOutput>(),
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = true)
    )]
    async fn persist_artifact(
        &self,
        Parameters(p): Parameters<PersistArtifactParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let explicit = p.session_id.clone();
        self.in_session("persist_artifact", explicit, caller(&ctx), |s| async move {
            let upload =
                persist::persist_artifact(&self.app, &s, &p.relative_path, &p.presigned_url);
            plain(until_cancelled(&ctx.ct, upload).await)
        })
        .await
    }

    #[tool(
        description = FORK_SESSION,
        output_schema = schema_for_output::<ForkSessionOutput>(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false)
    )]
    async fn fork_session(
        &self,
        Parameters(p): Parameters<ForkSessionParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let explicit = Some(p.session_id.clone());
        self.in_session("fork_session", explicit, caller(&ctx), |s| async move {
            plain(until_cancelled(&ctx.ct, branch::fork_session(&self.app, &s, p.count)).await)
        })
        .await
    }

    #[tool(
        description = "Save a checkpoint of a session: its variables (functions, classes and lambdas defined in cells included) and its workspace files, to roll back to later with restore_checkpoint. Waits for a call running in the session. Returns checkpoint_id, its size in bytes, and the variables that could not be saved (not_saved, name: why). The server keeps a bounded number per session; they survive a server restart and go with their session.",
        output_schema = schema_for_output::<CheckpointSessionOutput>(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false)
    )]
    async fn checkpoint_session(
        &self,
        Parameters(p): Parameters<CheckpointSessionParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let explicit = Some(p.session_id.clone());
        self.in_session(
            "checkpoint_session",
            explicit,
            caller(&ctx),
            |s| async move {
                let work = branch::checkpoint_session(&self.app, &s, p.label.as_deref());
                plain(until_cancelled(&ctx.ct, work).await)
            },
        )
        .await
    }

    #[tool(
        description = "Roll a session back to a checkpoint from checkpoint_session: its variables become the checkpoint's (every later one is gone) and its workspace files the checkpoint's (later files are removed). Returns restored and not_restored (name: why). The session's packages stay as they are.",
        output_schema = schema_for_output::<RestoreCheckpointOutput>(),
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    async fn restore_checkpoint(
        &self,
        Parameters(p): Parameters<RestoreCheckpointParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let explicit = Some(p.session_id.clone());
        self.in_session(
            "restore_checkpoint",
            explicit,
            caller(&ctx),
            |s| async move {
                let work = branch::restore_checkpoint(&self.app, &s, &p.checkpoint_id);
                plain(until_cancelled(&ctx.ct, work).await)
            },
        )
        .await
    }
}
