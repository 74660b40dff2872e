use super::*;
use prims_protocol::history::CellError;
use prims_protocol::jail::Status;
use prims_protocol::wire::ResetReason;

fn cell(n: u64, code: &str) -> HistoryCell {
    HistoryCell {
        n,
        code: code.into(),
        status: Status::Ok,
        stdout: String::new(),
        stderr: String::new(),
        cut: false,
        outputs: Vec::new(),
        error: None,
        restarted: None,
    }
}

#[test]
fn runs_become_code_cells_with_jupyter_outputs() {
    let mut a = cell(4, "print('hi')\n1 + 1");
    a.stdout = "hi\n".into();
    a.outputs.push(CellOutput {
        kind: OutputKind::Result,
        data: [("text/plain".to_string(), Value::from("2"))].into(),
        cut: false,
        file: None,
    });
    a.outputs.push(CellOutput {
        kind: OutputKind::Display,
        data: [
            ("text/plain".to_string(), Value::from("<Figure>")),
            ("image/png".to_string(), Value::from("iVBORw0KGgo=")),
            ("application/json".to_string(), json!({"a": 1})),
        ]
        .into(),
        cut: false,
        file: Some("figures/cell1-1.png".into()),
    });
    let mut b = cell(5, "1/0");
    b.status = Status::Error;
    b.restarted = Some(ResetReason::FreshRequested);
    b.error = Some(CellError {
        ename: "ZeroDivisionError".into(),
        evalue: "division by zero".into(),
        traceback: vec![
            "Traceback".into(),
            "ZeroDivisionError: division by zero".into(),
        ],
    });
    let nb = build(&[a, b], 3);

    assert_eq!(nb["nbformat"], 4);
    assert_eq!(nb["nbformat_minor"], 5);
    assert_eq!(nb["metadata"]["kernelspec"]["name"], "python3");
    let cells = nb["cells"].as_array().unwrap();
    let kinds: Vec<_> = cells
        .iter()
        .map(|c| c["cell_type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["markdown", "code", "markdown", "code"]);
    assert!(cells[0]["source"]
        .as_str()
        .unwrap()
        .starts_with("*3 earlier cells"));
    assert!(cells[2]["source"]
        .as_str()
        .unwrap()
        .contains("fresh_requested"));

    let first = &cells[1];
    assert_eq!(first["id"], "run-4");
    assert_eq!(first["execution_count"], 1);
    assert_eq!(first["source"], "print('hi')\n1 + 1");
    let outs = first["outputs"].as_array().unwrap();
    assert_eq!(
        outs[0],
        json!({"output_type": "stream", "name": "stdout", "text": "hi\n"})
    );
    assert_eq!(outs[1]["output_type"], "execute_result");
    assert_eq!(outs[1]["execution_count"], 1);
    assert_eq!(outs[1]["data"]["text/plain"], "2");
    assert_eq!(outs[2]["output_type"], "display_data");
    assert_eq!(outs[2]["data"]["image/png"], "iVBORw0KGgo=");
    assert_eq!(outs[2]["data"]["application/json"], json!({"a": 1}));

    let second = &cells[3];
    assert_eq!(second["execution_count"], 2);
    let err = &second["outputs"][0];
    assert_eq!(err["output_type"], "error");
    assert_eq!(err["ename"], "ZeroDivisionError");
    assert_eq!(err["evalue"], "division by zero");
    assert_eq!(err["traceback"].as_array().unwrap().len(), 2);
    // Every cell has a unique id, as nbformat 4.5 requires.
    let mut ids: Vec<_> = cells.iter().map(|c| c["id"].as_str().unwrap()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), cells.len());
}

#[test]
fn an_empty_history_is_an_empty_notebook_and_odd_runs_are_marked() {
    let nb = build(&[], 0);
    assert_eq!(nb["cells"], json!([]));

    let mut t = cell(1, "while True: pass");
    t.status = Status::Timeout;
    t.cut = true;
    t.outputs.push(CellOutput {
        kind: OutputKind::Display,
        data: [("text/html".to_string(), json!(["not", "a string"]))].into(),
        cut: true,
        file: None,
    });
    let nb = build(&[t], 1);
    let c = &nb["cells"][1];
    assert_eq!(
        c["metadata"]["prims"],
        json!({"status": "timeout", "cut": true})
    );
    assert!(nb["cells"][0]["source"]
        .as_str()
        .unwrap()
        .starts_with("*1 earlier cell of"));
    // nbformat wants text for a non-JSON type.
    assert_eq!(
        c["outputs"][0]["data"]["text/html"],
        "[\"not\",\"a string\"]"
    );
}

#[test]
fn html_and_svg_outputs_keep_only_inert_markup() {
    let mut a = cell(1, "display(HTML(...), SVG(...))");
    for (mime, value) in [
        (
            "text/html",
            json!("<b>kept</b><img src=\"x\" onerror=\"alert(1)\"><script>alert(2)</script>"),
        ),
        (
            "image/svg+xml",
            json!("<svg onload=\"alert(3)\"><circle r=\"4\"/></svg>"),
        ),
        // Not a string: its JSON text is HTML all the same.
        ("text/html", json!(["<script>alert(4)</script>"])),
    ] {
        a.outputs.push(CellOutput {
            kind: OutputKind::Display,
            data: [(mime.to_string(), value)].into(),
            cut: false,
            file: None,
        });
    }
    let nb = build(&[a], 0);
    let outs = &nb["cells"][0]["outputs"];
    assert_eq!(outs[0]["data"]["text/html"], "<b>kept</b><img>");
    assert_eq!(
        outs[1]["data"]["image/svg+xml"],
        "<svg><circle r=\"4\"></circle></svg>"
    );
    assert_eq!(outs[2]["data"]["text/html"], "[\"\"]");
    assert!(nb["metadata"]["prims"]["outputs"]
        .as_str()
        .unwrap()
        .starts_with("untrusted: HTML, SVG and Markdown sanitized"));
    assert!(OUTPUTS_NOTE.contains(sanitize::ID_PREFIX));
}

#[test]
fn markdown_becomes_clean_html_and_images_must_be_base64() {
    let mut a = cell(1, "display(Markdown(...))");
    for data in [
        json!({"text/plain": "<M>", "text/markdown": "**b** <img src=x onerror=alert(1)>"}),
        // A bundle with HTML of its own keeps that, cleaned.
        json!({"text/plain": "<M>", "text/markdown": "<script>1</script>", "text/html": "<i>h</i>"}),
        json!({"text/plain": "<P>", "image/png": "x\" onerror=\"alert(1)", "image/jpeg": "/9j/4A=="}),
    ] {
        let Value::Object(data) = data else {
            unreachable!()
        };
        a.outputs.push(CellOutput {
            kind: OutputKind::Display,
            data: data.into_iter().collect(),
            cut: false,
            file: None,
        });
    }
    let nb = build(&[a], 0);
    let outs = &nb["cells"][0]["outputs"];
    assert_eq!(
        outs[0]["data"],
        json!({"text/plain": "<M>", "text/html": "<p><strong>b</strong> <img></p>\n"})
    );
    assert_eq!(
        outs[1]["data"],
        json!({"text/plain": "<M>", "text/html": "<i>h</i>"})
    );
    assert_eq!(
        outs[2]["data"],
        json!({"text/plain": "<P>", "image/jpeg": "/9j/4A=="})
    );
}
