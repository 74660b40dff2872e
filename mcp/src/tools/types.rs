//! The tools' arguments and results. Names follow the original PRIMS; the
//! fields it did not have are optional arguments or extra result keys.
//!
//! The fields' doc comments are also their JSON schema descriptions, which
//! models read as plain text, so they keep `<path>` placeholders as they are.
#![allow(rustdoc::invalid_html_tags)]

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct RunCodeParams {
    /// Python source (at most 20,000 characters), run in /workspace as the
    /// next cell of the session's live interpreter: variables, imports and
    /// functions from earlier calls are still there.
    pub(crate) code: String,
    /// pip requirement specifiers, e.g. ["numpy==2.1.0", "scipy"].
    #[serde(default)]
    pub(crate) requirements: Option<Vec<String>>,
    /// Files downloaded before the run into mounts/<mountPath> (read-only).
    #[serde(default)]
    pub(crate) files: Option<Vec<FileSpec>>,
    /// Time limit in seconds; can only lower the server's limit.
    #[serde(default)]
    pub(crate) timeout_s: Option<f64>,
    /// Workspace to run in, from an earlier result; omit to use this
    /// connection's workspace (or a new one).
    #[serde(default)]
    #[schemars(with = "String", extend("x-mcp-header" = "Session-Id"))]
    pub(crate) session_id: Option<String>,
    /// Start a new interpreter for this call, dropping every variable and
    /// import of earlier calls (files in the workspace stay).
    #[serde(default)]
    pub(crate) fresh: Option<bool>,
    /// Only where the server allows network access (an allow-list): hosts
    /// this call may reach, which can only narrow the server's list, e.g.
    /// ["pypi.org", "*.githubusercontent.com", "api.example.com:8443"].
    #[serde(default)]
    pub(crate) network: Option<Vec<String>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct FileSpec {
    /// http(s) URL to download.
    pub(crate) url: String,
    /// Path under mounts/, e.g. "my_data.csv".
    #[serde(rename = "mountPath", alias = "mount_path")]
    pub(crate) mount_path: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct Artifact {
    /// File name.
    pub(crate) name: String,
    /// Relative to the workspace root: output/<path>.
    pub(crate) relative_path: String,
    pub(crate) size: u64,
    pub(crate) mime: String,
    /// Written by this run.
    pub(crate) changed: bool,
}

#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
pub(crate) struct Truncated {
    pub(crate) stdout: bool,
    pub(crate) stderr: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct RunCodeOutput {
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    /// Every file under output/.
    pub(crate) artifacts: Vec<Artifact>,
    pub(crate) session_id: String,
    /// Hints, present when stdout is empty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) feedback: Option<String>,
    /// 0 when the code finished, 1 after an exception, the code of
    /// `sys.exit(n)`; null when python was killed.
    pub(crate) exit_code: Option<i32>,
    /// The signal that killed python, if any.
    pub(crate) signal: Option<i32>,
    /// ok; error (an exception, traceback in stderr); exit (sys.exit with a
    /// non-zero code, or the interpreter exited); signal; timeout; or oom.
    pub(crate) status: String,
    /// The text of the code's last expression, when it ends with one whose
    /// value is not None and no `;` (as a notebook shows it), cut to 16,384
    /// characters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) result: Option<String>,
    /// Rich outputs, in order: every display() (and matplotlib figure) and
    /// the last expression's value, each a mime bundle: text/plain always,
    /// and text/html, text/markdown, image/png, image/jpeg (base64),
    /// image/svg+xml or application/json where the object gives them; a
    /// figure's data as application/vnd.prims.chart+json (docs/tools.md,
    /// "Chart data"). Images also come back as image content.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) outputs: Vec<CellOutputOut>,
    /// Outputs left out past the limits of one call (32 outputs, 4 MiB).
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) outputs_dropped: u32,
    /// kept: same interpreter as the previous call, variables intact;
    /// new: the session's first interpreter; reset: a new interpreter
    /// replaced one whose variables are gone (see state_reason).
    pub(crate) state: String,
    /// Why the interpreter is new: first_call, fresh_requested,
    /// requirements_changed, requirements_conflict (a requirement needs
    /// another version of a package the session has), limits_changed,
    /// network_changed, timed_out, out_of_memory, code_exited,
    /// channel_broken, stopped_idle, stopped_for_room, cancelled or
    /// server_restarted (the globals saved before the restart, at
    /// saved_at, are restored).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) state_reason: Option<String>,
    /// The reason in words, where it needs them: for requirements_conflict,
    /// the package and both versions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) state_message: Option<String>,
    /// Packages (name==version) this call's requirements installed into
    /// the session; the interpreter and its variables were kept.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) installed: Vec<String>,
    /// After stopped_idle or stopped_for_room: the globals restored from
    /// the previous interpreter, and those that could not be (name: why).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) restored: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) not_restored: Vec<String>,
    /// After server_restarted: when the restored globals were saved (a
    /// graceful stop's save, or the last autosave before a crash), RFC 3339
    /// UTC.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) saved_at: Option<String>,
    /// The session's last call before the server went down never ended:
    /// its variables are not in the save (its files may have changed).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) last_run_lost: bool,
    pub(crate) timed_out: bool,
    pub(crate) oom_killed: bool,
    pub(crate) duration_ms: u64,
    pub(crate) cpu_ms: u64,
    pub(crate) memory_peak_bytes: Option<u64>,
    /// Whether stdout or stderr hit the output cap.
    pub(crate) truncated: Truncated,
    /// Where the server allows network access: the hosts the code reached
    /// and the connections refused, with why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) network: Option<NetworkOut>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct CellOutputOut {
    /// display (a display() call or a figure) or result (the last
    /// expression's value).
    #[serde(rename = "type")]
    pub(crate) kind: String,
    /// Mime type to value.
    pub(crate) data: std::collections::BTreeMap<String, serde_json::Value>,
    /// A value was cut or left out to keep within the limits.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) cut: bool,
    /// A figure's copy in the workspace, output/figures/<name>.png.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) file: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct NetworkOut {
    pub(crate) allowed: Vec<NetAllowed>,
    pub(crate) denied: Vec<NetDenied>,
    /// Entries of this call's `network` the server's allow-list does not
    /// cover, so they allowed nothing.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) ignored: Vec<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct NetAllowed {
    pub(crate) host: String,
    pub(crate) port: u16,
    /// Both directions.
    pub(crate) bytes: u64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct NetDenied {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) reason: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct ListDirParams {
    /// Directory relative to the workspace root, e.g. "." or "output".
    #[serde(default = "dot")]
    pub(crate) dir_path: String,
    /// Workspace to use, from an earlier result; omit to use this
    /// connection's workspace (or a new one).
    #[serde(default)]
    #[schemars(with = "String", extend("x-mcp-header" = "Session-Id"))]
    pub(crate) session_id: Option<String>,
}

fn dot() -> String {
    ".".into()
}

#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct DirEntryOut {
    pub(crate) name: String,
    /// Relative to the workspace root.
    pub(crate) path: String,
    /// file, directory, symlink or other.
    #[serde(rename = "type")]
    pub(crate) kind: String,
    pub(crate) size: u64,
    /// Unix seconds.
    pub(crate) modified: u64,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ListDirOutput {
    /// The entries, sorted by name.
    pub(crate) result: Vec<DirEntryOut>,
    pub(crate) session_id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct PreviewFileParams {
    /// File relative to the workspace root, e.g. "output/result.csv".
    pub(crate) relative_path: String,
    /// Workspace to use, from an earlier result; omit to use this
    /// connection's workspace (or a new one).
    #[serde(default)]
    #[schemars(with = "String", extend("x-mcp-header" = "Session-Id"))]
    pub(crate) session_id: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct PreviewFileOutput {
    pub(crate) name: String,
    pub(crate) path: String,
    pub(crate) size: u64,
    pub(crate) mime: String,
    /// The first 8192 bytes as UTF-8 (invalid bytes replaced), or a note
    /// for a binary file.
    pub(crate) content: String,
    /// The file is longer than what `content` shows.
    pub(crate) truncated: bool,
    /// The file looks binary; `content` is a note, not the data.
    pub(crate) binary: bool,
    pub(crate) session_id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct MountFileParams {
    /// http(s) URL to download.
    pub(crate) url: String,
    /// Path under mounts/, e.g. "my_data.csv".
    pub(crate) mount_path: String,
    /// Workspace to use, from an earlier result; omit to use this
    /// connection's workspace (or a new one).
    #[serde(default)]
    #[schemars(with = "String", extend("x-mcp-header" = "Session-Id"))]
    pub(crate) session_id: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct MountFileOutput {
    /// mounts/<mount_path>, relative to the workspace root.
    pub(crate) mounted_as: String,
    pub(crate) bytes: u64,
    /// Already mounted in this session: nothing was downloaded.
    pub(crate) cached: bool,
    pub(crate) session_id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct PersistArtifactParams {
    /// File relative to output/, e.g. "plot.png".
    pub(crate) relative_path: String,
    /// A presigned URL that accepts an HTTP PUT.
    pub(crate) presigned_url: String,
    /// Workspace to use, from an earlier result; omit to use this
    /// connection's workspace (or a new one).
    #[serde(default)]
    #[schemars(with = "String", extend("x-mcp-header" = "Session-Id"))]
    pub(crate) session_id: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct PersistArtifactOutput {
    pub(crate) uploaded_bytes: u64,
    /// The HTTP status of the upload.
    pub(crate) status: u16,
    pub(crate) session_id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct PythonProgrammerArgs {
    /// What the code should do.
    pub(crate) task: String,
    /// Files already mounted, comma separated, e.g. "sales.csv, costs.xlsx".
    #[serde(default)]
    pub(crate) mounted_files: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::handler::server::common::schema_for_output;

    #[test]
    fn output_schemas_are_objects_and_feedback_is_optional() {
        let run = schema_for_output::<RunCodeOutput>();
        assert_eq!(run["type"], "object");
        let required: Vec<&str> = run["required"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v.as_str())
            .collect();
        assert!(required.contains(&"stdout") && required.contains(&"session_id"));
        assert!(!required.contains(&"feedback"), "{required:?}");
        for schema in [
            schema_for_output::<ListDirOutput>(),
            schema_for_output::<PreviewFileOutput>(),
            schema_for_output::<MountFileOutput>(),
            schema_for_output::<PersistArtifactOutput>(),
        ] {
            assert_eq!(schema["type"], "object");
        }
    }
}
