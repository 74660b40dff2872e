//! The MCP App views (MCP Apps, SEP-1865): `run_code` names a `ui://`
//! resource in its `_meta.ui.resourceUri`, and a host that renders apps
//! reads that resource and shows the call in it. A host without apps
//! ignores the key and shows the result as before.
//!
//! The view is one self-contained HTML document (`mcp/app/run-view.html`),
//! built into the binary: no external script, style or font, so it works
//! under the host's default CSP, which allows none. It is the same for
//! every caller and holds no data; the host hands it the call's arguments
//! and result.

use rmcp::model::{JsonObject, MetaObject, Resource, ResourceContents};
use serde_json::json;

/// The extension's identifier in capabilities.
pub(crate) const EXTENSION_ID: &str = "io.modelcontextprotocol/ui";
/// The mime type of an MCP App's HTML.
pub(crate) const APP_MIME: &str = "text/html;profile=mcp-app";
/// The view of one `run_code` call.
pub(crate) const RUN_VIEW_URI: &str = "ui://prims/run-view.html";
const RUN_VIEW_HTML: &str = include_str!("../app/run-view.html");

/// The `_meta` of `run_code`: the view's URI under the spec's key, and the
/// older flat key that hosts of the draft still read.
pub(crate) fn run_code_meta() -> MetaObject {
    let mut m = JsonObject::new();
    m.insert("ui".into(), json!({ "resourceUri": RUN_VIEW_URI }));
    m.insert("ui/resourceUri".into(), json!(RUN_VIEW_URI));
    MetaObject(m)
}

/// The extension's settings, as the server declares them.
pub(crate) fn capability() -> JsonObject {
    let mut o = JsonObject::new();
    o.insert("mimeTypes".into(), json!([APP_MIME]));
    o
}

/// The views as `resources/list` shows them.
pub(crate) fn listed() -> Vec<Resource> {
    vec![Resource::new(RUN_VIEW_URI, "run-view")
        .with_title("The view of a run_code call (MCP App)")
        .with_description(
            "An HTML view of one run_code call, for hosts that render MCP Apps: the code, its \
             output, tables, plots and errors.",
        )
        .with_mime_type(APP_MIME)
        .with_size(RUN_VIEW_HTML.len() as u64)]
}

/// The contents of the view at `uri`, if `uri` names one.
pub(crate) fn read(uri: &str) -> Option<ResourceContents> {
    if uri != RUN_VIEW_URI {
        return None;
    }
    let mut meta = JsonObject::new();
    meta.insert("ui".into(), json!({ "prefersBorder": true }));
    Some(
        ResourceContents::text(RUN_VIEW_HTML, uri)
            .with_mime_type(APP_MIME)
            .with_meta(MetaObject(meta)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_view_is_one_self_contained_document_within_100_kb() {
        assert!(
            RUN_VIEW_HTML.len() <= 100 * 1024,
            "{} bytes",
            RUN_VIEW_HTML.len()
        );
        let lower = RUN_VIEW_HTML.to_ascii_lowercase();
        for external in ["<link", "src=\"http", "src='http", "@import", "url(http"] {
            assert!(!lower.contains(external), "the view loads {external}");
        }
        assert!(read("ui://prims/other.html").is_none());
        let c = read(RUN_VIEW_URI).expect("the view");
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["mimeType"], APP_MIME);
        assert_eq!(v["uri"], RUN_VIEW_URI);
    }
}
