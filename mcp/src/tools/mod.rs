//! The five tools. Each resolves the caller's workspace, does its work
//! through the supervisor (and egress), and returns `structuredContent`
//! with a JSON text mirror, or an `isError` result a model can act on.

mod common;
pub mod files;
pub mod images;
pub mod mount;
pub mod persist;
pub mod run_code;
pub mod types;

use crate::error::ToolError;
use crate::server::PrimsServer;
use crate::sessions::{Caller, SessionRef};
use crate::streaming::Streamer;
use rmcp::handler::server::common::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_router, ErrorData as McpError, RoleServer};
use serde::Serialize;
use types::*;

const RUN_CODE: &str = "Run a self-contained Python script in an isolated sandbox (a Linux jail \
with no network) and return its stdout, stderr, exit code and the files it wrote. The script \
runs in a workspace that persists across calls of the same session: pass the session_id from \
an earlier result (or reuse this MCP connection) to see earlier files. Use print() to show \
results; bare expressions such as df.head() print nothing. Files written under output/ come \
back as artifacts (PNG/JPEG plots also as images) and can be downloaded from \
/artifacts/<relative_path>. Optional: requirements (pip specifiers), files \
[{url, mountPath}] downloaded to mounts/<mountPath> (read-only) before the run, timeout_s to \
lower the time limit.";

fn caller(ctx: &RequestContext<RoleServer>) -> Caller {
    Caller::from_parts(ctx.extensions.get::<http::request::Parts>())
}

impl PrimsServer {
    /// The tool result, and the metrics for it.
    fn finish<T: Serialize>(
        &self,
        tool: &str,
        session: Option<&str>,
        r: Result<(T, Vec<ContentBlock>), ToolError>,
    ) -> CallToolResult {
        self.app.metrics.record_tool(tool, r.is_ok());
        match r {
            Ok((value, extra)) => common::success(&value, extra),
            Err(mut e) => {
                tracing::debug!(tool, error = %e, "tool failed");
                if let Some(s) = session {
                    e.0.push_str(&format!("\n(session_id: {s})"));
                }
                common::failure(&e)
            }
        }
    }

    async fn session(
        &self,
        explicit: Option<&str>,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<SessionRef, ToolError> {
        self.app.sessions.resolve(explicit, &caller(ctx)).await
    }
}

fn plain<T>(r: Result<T, ToolError>) -> Result<(T, Vec<ContentBlock>), ToolError> {
    r.map(|v| (v, Vec::new()))
}

#[tool_router(router = tool_router, vis = "pub(crate)")]
impl PrimsServer {
    #[tool(
        description = RUN_CODE,
        output_schema = schema_for_output::<RunCodeOutput>(),
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = true)
    )]
    async fn run_code(
        &self,
        Parameters(p): Parameters<RunCodeParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        if p.code.chars().count() > run_code::MAX_CODE_CHARS {
            let e = ToolError::new("Code block too large (20k char limit)");
            return Ok(self.finish::<RunCodeOutput>("run_code", None, Err(e)));
        }
        let session = match self.session(p.session_id.as_deref(), &ctx).await {
            Ok(s) => s,
            Err(e) => return Ok(self.finish::<RunCodeOutput>("run_code", None, Err(e))),
        };
        let level = ctx.meta.log_level().or_else(|| self.log_level());
        let streamer = Streamer::new(ctx.peer.clone(), ctx.meta.get_progress_token(), level);
        let r = run_code::run_code(&self.app, &session, p, ctx.ct.clone(), streamer).await;
        Ok(self.finish("run_code", Some(&session.id), r))
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
        let session = match self.session(p.session_id.as_deref(), &ctx).await {
            Ok(s) => s,
            Err(e) => return Ok(self.finish::<ListDirOutput>("list_dir", None, Err(e))),
        };
        let r = files::list_dir(&self.app, &session, &p.dir_path).await;
        Ok(self.finish("list_dir", Some(&session.id), plain(r)))
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
        let session = match self.session(p.session_id.as_deref(), &ctx).await {
            Ok(s) => s,
            Err(e) => return Ok(self.finish::<PreviewFileOutput>("preview_file", None, Err(e))),
        };
        let r = files::preview_file(&self.app, &session, &p.relative_path).await;
        Ok(self.finish("preview_file", Some(&session.id), plain(r)))
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
        let session = match self.session(p.session_id.as_deref(), &ctx).await {
            Ok(s) => s,
            Err(e) => return Ok(self.finish::<MountFileOutput>("mount_file", None, Err(e))),
        };
        let r = tokio::select! {
            _ = ctx.ct.cancelled() => Err(ToolError::new("The call was cancelled.")),
            r = mount::mount_file(&self.app, &session, &p.url, &p.mount_path) => r,
        };
        Ok(self.finish("mount_file", Some(&session.id), plain(r)))
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
        let session = match self.session(p.session_id.as_deref(), &ctx).await {
            Ok(s) => s,
            Err(e) => {
                return Ok(self.finish::<PersistArtifactOutput>("persist_artifact", None, Err(e)))
            }
        };
        let r = tokio::select! {
            _ = ctx.ct.cancelled() => Err(ToolError::new("The call was cancelled.")),
            r = persist::persist_artifact(&self.app, &session, &p.relative_path, &p.presigned_url) => r,
        };
        Ok(self.finish("persist_artifact", Some(&session.id), plain(r)))
    }
}
