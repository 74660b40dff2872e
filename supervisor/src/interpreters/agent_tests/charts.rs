//! A matplotlib figure's data (charts.py), next to its PNG in the same
//! output: each kind of chart a figure can draw, read back exactly, and the
//! bounds on what a figure can send.

use super::harness::{Live, Start};
use crate::interpreters::agent::CHART_MIME;
use crate::interpreters::channel::{AgentOutput, CellStatus};
use prims_protocol::wire::OutputKind;
use serde_json::{json, Value};

async fn ipython(dir: &std::path::Path) -> Live {
    let mut a = Live::start_with(Start::ipython(dir)).await;
    assert!(
        a.ready.ipython.is_some(),
        "IPython did not start: {:?}",
        a.ready.ipython_error
    );
    a.ok("import matplotlib.pyplot as plt").await;
    a
}

fn chart(o: &AgentOutput) -> &Value {
    o.data
        .get(CHART_MIME)
        .unwrap_or_else(|| panic!("no chart in {o:?}"))
}

/// The chart of the one figure `code` shows, which comes with its PNG (and
/// the PNG's copy) in one output.
async fn one_chart(a: &mut Live, code: &str) -> Value {
    let run = a.cell(code).await;
    assert_eq!(run.done.status, CellStatus::Ok, "{code}: {run:?}");
    assert_eq!(run.outputs.len(), 1, "{code}: {:?}", run.outputs);
    let o = &run.outputs[0];
    let mimes: Vec<&str> = o.data.keys().map(String::as_str).collect();
    assert_eq!(mimes, [CHART_MIME, "image/png", "text/plain"], "{code}");
    assert!(!o.cut, "{o:?}");
    assert!(o.file.is_some(), "the PNG's copy: {o:?}");
    chart(o).clone()
}

#[tokio::test]
async fn a_line_chart_has_its_series_titles_labels_units_and_ticks_and_nan_is_null() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = ipython(dir.path()).await;
    let c = one_chart(
        &mut a,
        "plt.figure()\n\
         plt.plot([0, 1, 2], [1.5, 2.5, 2.0], label='up')\n\
         plt.plot([0, 1, 2], [3, float('nan'), 1], label='down')\n\
         plt.title('Two lines'); plt.xlabel('Time (s)'); plt.ylabel('Speed [m/s]')\n\
         plt.xticks([0, 1, 2]); plt.yticks([1, 2, 3])\n\
         plt.show()",
    )
    .await;
    assert_eq!(
        c,
        json!({
            "type": "line",
            "title": "Two lines",
            "x_label": "Time (s)", "x_unit": "s", "x_scale": "linear",
            "x_ticks": [0.0, 1.0, 2.0], "x_tick_labels": ["0", "1", "2"],
            "y_label": "Speed [m/s]", "y_unit": "m/s", "y_scale": "linear",
            "y_ticks": [1.0, 2.0, 3.0], "y_tick_labels": ["1", "2", "3"],
            "elements": [
                {"label": "up", "points": [[0.0, 1.5], [1.0, 2.5], [2.0, 2.0]]},
                {"label": "down", "points": [[0.0, 3.0], [1.0, null], [2.0, 1.0]]},
            ],
        })
    );

    // Dates are ISO text; a series without a label is numbered.
    let dates = one_chart(
        &mut a,
        "import datetime\n\
         plt.plot([datetime.date(2024, 1, 1), datetime.date(2024, 1, 2)], [1, 2])\n\
         plt.show()",
    )
    .await;
    assert_eq!(dates["x_scale"], "datetime");
    assert_eq!(
        dates["elements"],
        json!([{"label": "Line 0", "points": [
            ["2024-01-01T00:00:00+00:00", 1.0],
            ["2024-01-02T00:00:00+00:00", 2.0],
        ]}])
    );
    assert_eq!(dates["x_ticks"][0], "2024-01-01T00:00:00+00:00");
}

#[tokio::test]
async fn scatter_bar_and_horizontal_bar_charts() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = ipython(dir.path()).await;
    let scatter = one_chart(
        &mut a,
        "plt.scatter([1, 2, 3], [4, 5, 6], label='pts'); plt.scatter([7], [8])\n\
         plt.xticks([0, 5]); plt.yticks([4, 8])\n\
         plt.show()",
    )
    .await;
    assert_eq!(
        scatter,
        json!({
            "type": "scatter", "title": null,
            "x_label": null, "x_unit": null, "x_scale": "linear",
            "x_ticks": [0.0, 5.0], "x_tick_labels": ["0", "5"],
            "y_label": null, "y_unit": null, "y_scale": "linear",
            "y_ticks": [4.0, 8.0], "y_tick_labels": ["4", "8"],
            "elements": [
                {"label": "pts", "points": [[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]]},
                {"label": "Series 1", "points": [[7.0, 8.0]]},
            ],
        })
    );

    // Stacked: each bar's own value, not its top.
    let bars = one_chart(
        &mut a,
        "plt.bar(['a', 'b', 'c'], [3, 1, 2], label='Sales')\n\
         plt.bar(['a', 'b', 'c'], [1, 1, 1], bottom=[3, 1, 2], label='Returns')\n\
         plt.title('Stacked'); plt.yticks([0, 4]); plt.axhline(2)\n\
         plt.show()",
    )
    .await;
    assert_eq!(
        bars,
        json!({
            "type": "bar", "title": "Stacked",
            "x_label": null, "x_unit": null, "x_scale": "categorical",
            "x_ticks": [0.0, 1.0, 2.0], "x_tick_labels": ["a", "b", "c"],
            "y_label": null, "y_unit": null, "y_scale": "linear",
            "y_ticks": [0.0, 4.0], "y_tick_labels": ["0", "4"],
            "elements": [
                {"label": "a", "group": "Sales", "value": 3.0},
                {"label": "b", "group": "Sales", "value": 1.0},
                {"label": "c", "group": "Sales", "value": 2.0},
                {"label": "a", "group": "Returns", "value": 1.0},
                {"label": "b", "group": "Returns", "value": 1.0},
                {"label": "c", "group": "Returns", "value": 1.0},
            ],
        })
    );

    // Horizontal: x_* is the axis of the categories (as E2B has it).
    let barh = one_chart(
        &mut a,
        "plt.barh(['x', 'y'], [5, 7]); plt.xlabel('Count'); plt.ylabel('Item'); plt.xticks([0, 7])\n\
         plt.show()",
    )
    .await;
    assert_eq!(
        barh,
        json!({
            "type": "bar", "title": null,
            "x_label": "Item", "x_unit": null, "x_scale": "categorical",
            "x_ticks": [0.0, 1.0], "x_tick_labels": ["x", "y"],
            "y_label": "Count", "y_unit": null, "y_scale": "linear",
            "y_ticks": [0.0, 7.0], "y_tick_labels": ["0", "7"],
            "elements": [
                {"label": "x", "group": "Group 0", "value": 5.0},
                {"label": "y", "group": "Group 0", "value": 7.0},
            ],
        })
    );

    // Numeric positions named with xticks: the names.
    let named = one_chart(
        &mut a,
        "plt.bar([0, 1], [2, 3]); plt.xticks([0, 1], ['first', 'second'])\nplt.show()",
    )
    .await;
    assert_eq!(
        named["elements"],
        json!([
            {"label": "first", "group": "Group 0", "value": 2.0},
            {"label": "second", "group": "Group 0", "value": 3.0},
        ])
    );
}

#[tokio::test]
async fn pie_and_box_and_whisker_charts() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = ipython(dir.path()).await;
    let pie = one_chart(
        &mut a,
        "plt.pie([90, 10], labels=['No', 'Yes'], startangle=90, autopct='%1.0f%%'); plt.title('Pie')\n\
         plt.show()",
    )
    .await;
    assert_eq!(
        pie,
        json!({
            "type": "pie", "title": "Pie",
            "elements": [
                {"label": "No", "angle": 324.0, "radius": 1.0},
                {"label": "Yes", "angle": 36.0, "radius": 1.0},
            ],
        })
    );

    let boxes = one_chart(
        &mut a,
        "plt.boxplot([[1, 2, 3, 4, 5, 20], [2, 3, 4, 5, 6]], tick_labels=['A', 'B'])\n\
         plt.ylabel('Score'); plt.yticks([0, 20])\n\
         plt.show()",
    )
    .await;
    assert_eq!(
        boxes,
        json!({
            "type": "box_and_whisker", "title": null,
            "x_label": null, "x_unit": null, "x_scale": "linear",
            "x_ticks": [1.0, 2.0], "x_tick_labels": ["A", "B"],
            "y_label": "Score", "y_unit": null, "y_scale": "linear",
            "y_ticks": [0.0, 20.0], "y_tick_labels": ["0", "20"],
            "elements": [
                {"label": "A", "min": 1.0, "first_quartile": 2.25, "median": 3.5,
                 "third_quartile": 4.75, "max": 5.0, "outliers": [20.0]},
                {"label": "B", "min": 2.0, "first_quartile": 3.0, "median": 4.0,
                 "third_quartile": 5.0, "max": 6.0, "outliers": []},
            ],
        })
    );

    // Filled boxes, drawn across: the same numbers, x_* the categories'.
    let across = one_chart(
        &mut a,
        "plt.boxplot([[1, 2, 3, 4, 5, 20]], tick_labels=['A'], patch_artist=True, orientation='horizontal')\n\
         plt.xlabel('Score')\n\
         plt.show()",
    )
    .await;
    assert_eq!(across["type"], "box_and_whisker");
    assert_eq!(
        (&across["x_label"], &across["y_label"]),
        (&Value::Null, &json!("Score"))
    );
    assert_eq!(across["elements"], json!([boxes["elements"][0]]));
}

#[tokio::test]
async fn subplots_are_a_superchart_and_an_image_is_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = ipython(dir.path()).await;
    let both = one_chart(
        &mut a,
        "fig, (l, r) = plt.subplots(1, 2); fig.suptitle('Both')\n\
         l.plot([1, 2], [3, 4]); l.set_title('Left'); l.set_xlabel('t')\n\
         r.bar(['p'], [2]); r.set_title('Right')\n\
         plt.show()",
    )
    .await;
    assert_eq!(both["type"], "superchart");
    assert_eq!(both["title"], "Both");
    let parts = both["elements"].as_array().unwrap();
    assert_eq!(parts.len(), 2, "{both}");
    assert_eq!(
        (&parts[0]["type"], &parts[0]["title"], &parts[0]["x_label"]),
        (&json!("line"), &json!("Left"), &json!("t"))
    );
    assert_eq!(
        parts[0]["elements"],
        json!([{"label": "Line 0", "points": [[1.0, 3.0], [2.0, 4.0]]}])
    );
    assert_eq!(
        (&parts[1]["type"], &parts[1]["title"]),
        (&json!("bar"), &json!("Right"))
    );
    assert_eq!(
        parts[1]["elements"],
        json!([{"label": "p", "group": "Group 0", "value": 2.0}])
    );

    // Its colorbar is no chart of its own.
    let image = one_chart(
        &mut a,
        "plt.imshow([[1, 2], [3, 4]]); plt.colorbar(); plt.title('Image')\nplt.show()",
    )
    .await;
    assert_eq!(
        image,
        json!({"type": "unknown", "title": "Image", "elements": []})
    );
}

#[tokio::test]
async fn every_way_a_figure_is_shown_carries_its_chart() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = ipython(dir.path()).await;
    let line = json!([{"label": "Line 0", "points": [[0.0, 5.0], [1.0, 6.0]]}]);
    // Left open at the end of the cell.
    let open = one_chart(&mut a, "plt.figure(); plt.plot([5, 6]);").await;
    assert_eq!(open["elements"], line);
    // display(fig), closed first so that only the display shows it.
    let shown = one_chart(
        &mut a,
        "from IPython.display import display\n\
         fig = plt.figure(); plt.plot([5, 6]); plt.close(fig)\n\
         display(fig)",
    )
    .await;
    assert_eq!(shown["elements"], line);
    // The cell's last value.
    let run = a.cell("fig").await;
    assert_eq!(run.outputs.len(), 1, "{run:?}");
    assert_eq!(run.outputs[0].kind, OutputKind::Result);
    assert_eq!(chart(&run.outputs[0])["elements"], line);
    // Anything else has none.
    let text = a.cell("display('no figure'); 42").await;
    assert!(
        text.outputs
            .iter()
            .all(|o| !o.data.contains_key(CHART_MIME)),
        "{text:?}"
    );
}

#[tokio::test]
async fn a_million_points_are_cut_to_ten_thousand_and_the_chart_stays_small() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = ipython(dir.path()).await;
    let started = std::time::Instant::now();
    let c = one_chart(
        &mut a,
        "import numpy as np\n\
         x = np.arange(1_000_000)\n\
         plt.plot(x, x * 2.0, label='big'); plt.plot([0, 1], [5, 5], label='small')\n\
         plt.show()",
    )
    .await;
    assert_eq!(c["truncated"], true, "{:.300}", c.to_string());
    let big = c["elements"][0]["points"].as_array().unwrap();
    let small = c["elements"][1]["points"].as_array().unwrap();
    // The short series whole, the long one what is left of 10,000.
    assert_eq!(small, &[json!([0.0, 5.0]), json!([1.0, 5.0])]);
    assert_eq!(big.len(), 10_000 - 2);
    assert_eq!(big[0], json!([0.0, 0.0]));
    assert_eq!(big[9_997], json!([9997.0, 19994.0]));
    let bytes = c.to_string().len();
    assert!(bytes < 512 * 1024, "{bytes} bytes");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );

    // Thousands of bars with long names: still under the cap, fewer of them.
    let many = a
        .cell(
            "plt.bar([str(i) * 200 for i in range(3000)], range(3000))\n\
             plt.xticks([])\n\
             plt.show()",
        )
        .await;
    let c = chart(&many.outputs[0]);
    assert_eq!(c["truncated"], true);
    let n = c["elements"].as_array().unwrap().len();
    assert!((1..=1000).contains(&n), "{n} bars");
    assert!(c.to_string().len() < 512 * 1024);
}

#[tokio::test]
async fn a_chart_the_code_displays_is_json_checked_and_nan_never_breaks_the_channel() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = ipython(dir.path()).await;
    let run = a
        .cell(&format!(
            "from IPython.display import display, JSON\n\
             display({{'{CHART_MIME}': {{'type': 'own'}}, 'text/plain': 'mine'}}, raw=True)\n\
             display({{'{CHART_MIME}': {{'v': float('nan')}}, 'text/plain': 'nan'}}, raw=True)\n\
             display({{'{CHART_MIME}': object(), 'text/plain': 'object'}}, raw=True)\n\
             display(JSON({{'a': float('inf')}}))\n\
             print('after')"
        ))
        .await;
    assert_eq!(run.done.status, CellStatus::Ok, "{run:?}");
    assert_eq!(run.stdout, "after\n");
    assert_eq!(run.outputs.len(), 4, "{:?}", run.outputs);
    assert_eq!(chart(&run.outputs[0]), &json!({"type": "own"}));
    assert!(!run.outputs[0].cut);
    for o in &run.outputs[1..] {
        assert!(o.cut, "{o:?}");
        let mimes: Vec<&str> = o.data.keys().map(String::as_str).collect();
        assert_eq!(mimes, ["text/plain"], "{o:?}");
    }
    assert_eq!(a.ok("1 + 1").await.as_deref(), Some("2"));
}
