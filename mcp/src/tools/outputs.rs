//! A cell's rich outputs (its `display()`s, figures and last value, as
//! mime bundles) in a run_code result: in `outputs`, and as content blocks
//! after the JSON, in order: PNG and JPEG as image content, markdown and
//! plain text as text. The JSON text mirror carries a note in place of
//! each image's base64, which the image content already shows, and of a
//! large chart's data, which a model reading the text would pay for in
//! context (`structuredContent` keeps both whole).

use super::types::CellOutputOut;
use base64::Engine;
use prims_protocol::wire::{CellOutput, OutputKind};
use rmcp::model::ContentBlock;
use serde_json::Value;

/// The largest image shown as image content, decoded.
const MAX_IMAGE_BYTES: usize = 1024 * 1024;

pub(crate) fn out(o: &CellOutput) -> CellOutputOut {
    CellOutputOut {
        kind: match o.kind {
            OutputKind::Display => "display",
            OutputKind::Result => "result",
        }
        .to_owned(),
        data: o.data.clone().into_iter().collect(),
        cut: o.cut,
        file: o.file.clone(),
    }
}

/// The content blocks of `outputs`, in order.
pub(crate) fn blocks(outputs: &[CellOutput]) -> Vec<ContentBlock> {
    outputs.iter().filter_map(block).collect()
}

fn block(o: &CellOutput) -> Option<ContentBlock> {
    for mime in ["image/png", "image/jpeg"] {
        if let Some(image) = o.data.get(mime).and_then(Value::as_str) {
            if is_image(mime, image) {
                return Some(ContentBlock::image(image.to_owned(), mime.to_owned()));
            }
        }
    }
    let text = ["text/markdown", "text/plain"]
        .iter()
        .find_map(|m| o.data.get(*m).and_then(Value::as_str))?;
    // The last value is already `result`; a display of nothing says nothing.
    if o.kind == OutputKind::Result || text.is_empty() {
        return None;
    }
    Some(ContentBlock::text(text.to_owned()))
}

/// Base64 of a PNG or JPEG of at most [`MAX_IMAGE_BYTES`].
fn is_image(mime: &str, b64: &str) -> bool {
    if b64.len() > MAX_IMAGE_BYTES.div_ceil(3) * 4 {
        return false;
    }
    let Ok(data) = base64::engine::general_purpose::STANDARD.decode(b64) else {
        return false;
    };
    match mime {
        "image/png" => data.starts_with(b"\x89PNG\r\n\x1a\n"),
        _ => data.starts_with(&[0xff, 0xd8, 0xff]),
    }
}

/// The figure files `outputs` already shows, which need no image of their
/// own as files.
pub(crate) fn shown_files(outputs: &[CellOutput]) -> Vec<String> {
    outputs.iter().filter_map(|o| o.file.clone()).collect()
}

/// The chart data a text mirror keeps whole, as JSON bytes; a larger one
/// becomes a note of what it holds.
const MIRROR_CHART_BYTES: usize = 4096;
const CHART_MIME: &str = "application/vnd.prims.chart+json";

/// `json` (a result) with a note in place of each output image's base64
/// and of each chart's data over [`MIRROR_CHART_BYTES`].
pub(crate) fn shorten_for_text(json: &mut Value) {
    let Some(outputs) = json.get_mut("outputs").and_then(Value::as_array_mut) else {
        return;
    };
    for o in outputs {
        let Some(data) = o.get_mut("data").and_then(Value::as_object_mut) else {
            continue;
        };
        for (mime, v) in data.iter_mut() {
            if mime == CHART_MIME {
                let bytes = v.to_string().len();
                if bytes > MIRROR_CHART_BYTES {
                    *v = Value::String(chart_note(v, bytes));
                }
                continue;
            }
            if mime.starts_with("image/") && mime != "image/svg+xml" {
                let bytes = v.as_str().map_or(0, |s| s.len() / 4 * 3);
                *v = Value::String(format!(
                    "<{mime}, about {bytes} bytes: shown as image content>"
                ));
            }
        }
    }
}

/// What a chart holds, in a line: its kind, title, and elements.
fn chart_note(chart: &Value, bytes: usize) -> String {
    let kind = chart["type"].as_str().unwrap_or("unknown");
    let title = chart["title"].as_str().map_or(String::new(), |t| {
        let t: String = t.chars().take(80).collect();
        format!(" {t:?}")
    });
    let elements = chart["elements"].as_array().map_or(0, Vec::len);
    format!(
        "<{CHART_MIME}: a {kind} chart{title} with {elements} element(s), about {bytes} bytes: \
         whole in structuredContent and the session's notebook>"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn output(kind: OutputKind, data: &[(&str, Value)]) -> CellOutput {
        CellOutput {
            kind,
            data: data
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect::<BTreeMap<_, _>>(),
            cut: false,
            file: None,
        }
    }

    const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

    #[test]
    fn images_become_image_content_and_displays_text() {
        let outs = [
            output(
                OutputKind::Display,
                &[("text/plain", "<Figure>".into()), ("image/png", PNG.into())],
            ),
            output(
                OutputKind::Display,
                &[
                    ("text/plain", "hi".into()),
                    ("text/markdown", "# hi".into()),
                ],
            ),
            output(OutputKind::Result, &[("text/plain", "42".into())]),
            // Not really a PNG: its text stands instead.
            output(
                OutputKind::Display,
                &[("text/plain", "x".into()), ("image/png", "AAAA".into())],
            ),
        ];
        let b = blocks(&outs);
        assert_eq!(b.len(), 3, "{b:?}");
        assert!(b[0].as_image().is_some());
        assert_eq!(b[1].as_text().map(|t| t.text.as_str()), Some("# hi"));
        assert_eq!(b[2].as_text().map(|t| t.text.as_str()), Some("x"));
    }

    #[test]
    fn the_text_mirror_notes_images_instead_of_their_base64() {
        let mut json = serde_json::json!({
            "outputs": [{"type": "display", "data": {"image/png": PNG, "text/plain": "<Figure>"}}]
        });
        shorten_for_text(&mut json);
        let png = json["outputs"][0]["data"]["image/png"].as_str().unwrap();
        assert!(png.starts_with("<image/png, about "), "{png}");
        assert_eq!(json["outputs"][0]["data"]["text/plain"], "<Figure>");
    }

    #[test]
    fn the_text_mirror_keeps_small_charts_and_notes_large_ones() {
        let small = serde_json::json!({"type": "bar", "title": "t", "elements": [
            {"label": "a", "group": "g", "value": 1.0}]});
        let points: Vec<_> = (0..1000).map(|i| serde_json::json!([i, i * i])).collect();
        let large = serde_json::json!({"type": "line", "title": "squares", "elements": [
            {"label": "y", "points": points}]});
        let mut json = serde_json::json!({"outputs": [
            {"type": "display", "data": {CHART_MIME: small.clone()}},
            {"type": "display", "data": {CHART_MIME: large}},
        ]});
        shorten_for_text(&mut json);
        assert_eq!(json["outputs"][0]["data"][CHART_MIME], small);
        let note = json["outputs"][1]["data"][CHART_MIME].as_str().unwrap();
        assert!(
            note.starts_with(
                "<application/vnd.prims.chart+json: a line chart \"squares\" with 1 element(s), about "
            ),
            "{note}"
        );
    }
}
