//! A session's recorded runs as a Jupyter notebook (nbformat 4.5): what
//! `prims://sessions/{session_id}/notebook.ipynb` and
//! `GET /sessions/{session_id}/notebook.ipynb` serve.
//!
//! Each run is a code cell with its outputs: stdout and stderr as `stream`
//! outputs, then its displays and result in order, then its exception.
//! Cells are numbered 1, 2, 3… down the notebook, which is what a re-run
//! from a fresh kernel numbers them; the interpreter's own counter starts
//! again at each restart, so it would repeat numbers. A markdown cell
//! stands where the interpreter restarted, and one at the top says how
//! many earlier runs the history's bounds dropped. The notebook is not
//! signed, so Jupyter opens it untrusted; for viewers that would render
//! its outputs as they are, HTML, SVG and Markdown outputs keep only inert
//! markup ([`sanitize`]).

use crate::pool::SupervisorPool;
use crate::sessions::SessionRef;
use prims_protocol::client::ClientError;
use prims_protocol::history::{HistoryCell, HistoryPage};
use prims_protocol::wire::{CellOutput, OutputKind};
use serde_json::{json, Map, Value};

/// The resource path and file name the notebook goes by.
pub(crate) const NOTEBOOK_PATH: &str = "notebook.ipynb";
pub(crate) const NOTEBOOK_MIME: &str = "application/x-ipynb+json";
/// What `metadata.prims.outputs` says was done to the outputs.
pub(crate) const OUTPUTS_NOTE: &str = "untrusted: HTML, SVG and Markdown sanitized \
    (Markdown rendered to HTML); removed: scripts, event handlers, frames, forms, objects, \
    classes, HTML styles, SVG styles but plain paint and text ones, every URL but data: \
    images and #fragments; ids prefixed with prims-out-";
/// Pages asked for at most: the history is bounded by the policy, so this
/// only stops a supervisor that keeps answering.
const MAX_PAGES: usize = 1024;

/// The session's notebook as JSON bytes.
pub(crate) async fn fetch(sup: &SupervisorPool, s: &SessionRef) -> Result<Vec<u8>, ClientError> {
    let c = sup.client().await?;
    let tenant = s.tenant.as_deref();
    let first = c.history(&s.id, tenant, 0).await?;
    let dropped = first.dropped;
    let mut cells = Vec::new();
    let mut page: HistoryPage = first;
    for _ in 0..MAX_PAGES {
        let last = cells.last().map_or(0, |c: &HistoryCell| c.n);
        // Numbers only grow; a page that goes back is ignored.
        cells.extend(page.cells.into_iter().filter(|c| c.n > last));
        match page.next {
            Some(from) if from > last => page = c.history(&s.id, tenant, from).await?,
            _ => break,
        }
    }
    let nb = build(&cells, dropped);
    Ok(serde_json::to_vec_pretty(&nb).unwrap_or_default())
}

/// The nbformat 4.5 document of `cells`, after `dropped` runs left out.
pub(crate) fn build(cells: &[HistoryCell], dropped: u64) -> Value {
    let mut out = Vec::with_capacity(cells.len() + 1);
    if dropped > 0 {
        let s = if dropped == 1 { "" } else { "s" };
        out.push(markdown(
            "dropped".into(),
            format!(
                "*{dropped} earlier cell{s} of this session were dropped to keep its history \
                 within its bounds (sessions.history_cells, sessions.history_bytes).*"
            ),
        ));
    }
    for (i, cell) in cells.iter().enumerate() {
        if let Some(reason) = cell.restarted {
            let why = serde_json::to_value(reason)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            out.push(markdown(
                format!("restart-{}", cell.n),
                format!("*The interpreter restarted: {why}.*"),
            ));
        }
        out.push(code_cell(cell, i as u64 + 1));
    }
    json!({
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
            "language_info": {"name": "python"},
            // Outputs come from untrusted code: say what was done to them.
            "prims": {"outputs": OUTPUTS_NOTE},
        },
        "cells": out,
    })
}

fn markdown(id: String, text: String) -> Value {
    json!({"cell_type": "markdown", "id": id, "metadata": {}, "source": text})
}

fn code_cell(cell: &HistoryCell, count: u64) -> Value {
    let mut outputs = Vec::new();
    for (name, text) in [("stdout", &cell.stdout), ("stderr", &cell.stderr)] {
        if !text.is_empty() {
            outputs.push(json!({"output_type": "stream", "name": name, "text": text}));
        }
    }
    outputs.extend(cell.outputs.iter().map(|o| rich(o, count)));
    if let Some(e) = &cell.error {
        outputs.push(json!({
            "output_type": "error",
            "ename": e.ename,
            "evalue": e.evalue,
            "traceback": e.traceback,
        }));
    }
    let mut metadata = Map::new();
    let status = serde_json::to_value(cell.status).unwrap_or(Value::Null);
    if status != "ok" && status != "error" || cell.cut {
        metadata.insert("prims".into(), json!({"status": status, "cut": cell.cut}));
    }
    json!({
        "cell_type": "code",
        "id": format!("run-{}", cell.n),
        "execution_count": count,
        "metadata": metadata,
        "source": cell.code,
        "outputs": outputs,
    })
}

/// A display or a result; a value of a non-JSON type that is not text is
/// shown as its JSON text, which is what nbformat requires of it. Its data
/// is made inert ([`inert_data`]).
fn rich(o: &CellOutput, count: u64) -> Value {
    let data: Map<String, Value> = o
        .data
        .iter()
        .map(|(mime, v)| {
            let is_json = mime == "application/json" || mime.ends_with("+json");
            let v = match v {
                Value::String(_) => v.clone(),
                _ if is_json => v.clone(),
                other => Value::String(other.to_string()),
            };
            (mime.clone(), v)
        })
        .collect();
    let data = inert_data(data);
    match o.kind {
        OutputKind::Result => json!({
            "output_type": "execute_result",
            "execution_count": count,
            "data": data,
            "metadata": {},
        }),
        OutputKind::Display => json!({
            "output_type": "display_data",
            "data": data,
            "metadata": {},
        }),
    }
}

/// `data` with only inert markup ([`sanitize`]): HTML and SVG cleaned;
/// Markdown rendered to cleaned HTML, which takes its place (a viewer would
/// render raw HTML in it as it is), unless the bundle has HTML of its own;
/// a PNG or JPEG that is not base64 dropped, since a template puts it into
/// an attribute.
fn inert_data(mut data: Map<String, Value>) -> Map<String, Value> {
    if let Some(md) = data.remove("text/markdown") {
        if let (false, Value::String(md)) = (data.contains_key("text/html"), md) {
            data.insert("text/html".into(), Value::String(sanitize::markdown(&md)));
        }
    }
    for (mime, v) in data.iter_mut() {
        if let Value::String(t) = v {
            match mime.as_str() {
                "text/html" => *t = sanitize::html(t),
                "image/svg+xml" => *t = sanitize::svg(t),
                _ => {}
            }
        }
    }
    data.retain(|mime, v| match (mime.as_str(), &*v) {
        ("image/png" | "image/jpeg", Value::String(b)) => is_base64(b),
        _ => true,
    });
    data
}

fn is_base64(text: &str) -> bool {
    text.bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'\n' | b'\r'))
}

mod sanitize;
#[cfg(test)]
mod tests;
