//! Cells through IPython (the IPython layer): magics, `!cmd`, the display
//! hook and `_`, the trailing `;`, `display()` and rich outputs, figures,
//! tracebacks that name the cell, and hostile reprs that cannot break the
//! agent or its channel.

use super::harness::{Live, Start};
use crate::interpreters::agent::{MIME_KEPT, OUTPUTS_MAX};
use crate::interpreters::channel::{AgentOutput, CellStatus};
use base64::Engine;
use prims_protocol::wire::OutputKind;

async fn ipython(dir: &std::path::Path) -> Live {
    let a = Live::start_with(Start::ipython(dir)).await;
    assert!(
        a.ready.ipython.is_some(),
        "IPython did not start: {:?}",
        a.ready.ipython_error
    );
    a
}

fn mimes(o: &AgentOutput) -> Vec<&str> {
    o.data.keys().map(String::as_str).collect()
}

fn text<'a>(o: &'a AgentOutput, mime: &str) -> &'a str {
    o.data
        .get(mime)
        .and_then(|v| v.as_str())
        .unwrap_or_else(|| panic!("no {mime} in {o:?}"))
}

#[tokio::test]
async fn the_display_hook_underscores_and_a_trailing_semicolon_work_as_in_jupyter() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = ipython(dir.path()).await;
    let quiet = a.cell("x = 20\nx + 5;").await;
    assert_eq!(quiet.done.result, None, "a trailing ; shows nothing");
    assert!(quiet.outputs.is_empty(), "{:?}", quiet.outputs);

    let shown = a.cell("x + 5").await;
    assert_eq!(shown.done.result.as_deref(), Some("25"));
    assert_eq!(shown.outputs.len(), 1);
    assert_eq!(shown.outputs[0].kind, OutputKind::Result);
    assert_eq!(text(&shown.outputs[0], "text/plain"), "25");

    a.ok("x * 2").await;
    assert_eq!(a.ok("(_, __)").await.as_deref(), Some("(40, 25)"));
    assert_eq!(a.ok("Out[3]").await.as_deref(), Some("40"));
    assert_eq!(shown.stdout, "", "the value is an output, not printed");
}

#[tokio::test]
async fn display_and_ipython_display_objects_come_back_as_mime_bundles() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = ipython(dir.path()).await;
    let run = a
        .cell(
            "from IPython.display import Markdown, HTML, JSON, display\n\
             display(Markdown('# title'))\n\
             display(HTML('<b>bold</b>'), JSON({'a': [1, 2]}))\n\
             display({'k': 1})\n\
             print('between')\n\
             HTML('<i>last</i>')",
        )
        .await;
    assert_eq!(run.done.status, CellStatus::Ok, "{run:?}");
    let kinds: Vec<(OutputKind, Vec<&str>)> =
        run.outputs.iter().map(|o| (o.kind, mimes(o))).collect();
    assert_eq!(
        kinds,
        [
            (OutputKind::Display, vec!["text/markdown", "text/plain"]),
            (OutputKind::Display, vec!["text/html", "text/plain"]),
            (OutputKind::Display, vec!["application/json", "text/plain"]),
            (OutputKind::Display, vec!["text/plain"]),
            (OutputKind::Result, vec!["text/html", "text/plain"]),
        ]
    );
    assert_eq!(text(&run.outputs[0], "text/markdown"), "# title");
    assert_eq!(run.outputs[2].data["application/json"]["a"][1], 2);
    assert_eq!(text(&run.outputs[3], "text/plain"), "{'k': 1}");
    assert_eq!(text(&run.outputs[4], "text/html"), "<i>last</i>");
    assert_eq!(run.stdout, "between\n");
    for o in &run.outputs {
        assert!(mimes(o).iter().all(|m| MIME_KEPT.contains(m)), "{o:?}");
    }
}

#[tokio::test]
async fn magics_and_shell_escapes_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = ipython(dir.path()).await;
    let bang = a.cell("!echo from-the-shell").await;
    assert_eq!(bang.stdout, "from-the-shell\n", "{bang:?}");
    assert_eq!(
        a.ok("r = !echo captured\nr").await.as_deref(),
        Some("['captured']")
    );
    let timed = a.cell("%time sum(range(10))").await;
    assert!(timed.stdout.contains("Wall time"), "{timed:?}");
    assert_eq!(timed.done.result.as_deref(), Some("45"));
    let timeit = a.cell("%timeit -n 2 -r 1 sum(range(10))").await;
    assert!(timeit.stdout.contains("per loop"), "{timeit:?}");
    let hidden = a.cell("%%capture cap\nprint('hidden')").await;
    assert_eq!(hidden.stdout, "");
    assert_eq!(a.ok("cap.stdout").await.as_deref(), Some("'hidden\\n'"));
    let written = a.cell("%%writefile w.txt\nhello file").await;
    assert_eq!(written.done.status, CellStatus::Ok, "{written:?}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("w.txt")).unwrap(),
        "hello file\n"
    );
}

#[tokio::test]
async fn a_traceback_names_the_cell_and_goes_to_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = ipython(dir.path()).await;
    a.ok("y = 1").await;
    let run = a.cell("def boom():\n    return 1 / 0\nboom()").await;
    assert_eq!(run.done.status, CellStatus::Error);
    assert_eq!(run.done.exit_code, Some(1));
    assert_eq!(run.done.exception.as_deref(), Some("ZeroDivisionError"));
    assert_eq!(run.stdout, "");
    assert!(run.stderr.contains("Cell In[2], line 3"), "{}", run.stderr);
    assert!(run.stderr.contains("return 1 / 0"), "{}", run.stderr);
    assert!(
        run.stderr
            .trim_end()
            .ends_with("ZeroDivisionError: division by zero"),
        "{}",
        run.stderr
    );
    let syntax = a.cell("x = (").await;
    assert_eq!(syntax.done.exception.as_deref(), Some("SyntaxError"));
    assert_eq!(a.ok("y").await.as_deref(), Some("1"), "the state survives");
}

#[tokio::test]
async fn sys_exit_is_an_exit_status_without_ipython_noise() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = ipython(dir.path()).await;
    let run = a.cell("import sys\nsys.exit(3)").await;
    assert_eq!(
        (run.done.status, run.done.exit_code),
        (CellStatus::Exit, Some(3))
    );
    assert_eq!(run.stderr, "", "{run:?}");
    let msg = a.cell("raise SystemExit('bye')").await;
    assert_eq!(
        (msg.done.status, msg.done.exit_code),
        (CellStatus::Exit, Some(1))
    );
    assert_eq!(msg.stderr, "bye\n");
    assert_eq!(
        a.ok("1 + 1").await.as_deref(),
        Some("2"),
        "the shell lives on"
    );
}

#[tokio::test]
async fn a_figure_comes_back_as_a_png_and_a_file_with_text_in_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = ipython(dir.path()).await;
    // The size a tight PNG of the figure has (the inline backend crops to
    // what is drawn, as Jupyter's does), printed before it is shown.
    let run = a
        .cell(
            "import io, matplotlib.pyplot as plt\n\
             fig = plt.figure(figsize=(4, 3), dpi=50)\n\
             plt.plot([1, 2, 3])\n\
             plt.title('WWWWWWWW', fontsize=20)\n\
             buf = io.BytesIO()\n\
             fig.savefig(buf, format='png', bbox_inches='tight')\n\
             print(int.from_bytes(buf.getvalue()[16:20], 'big'), int.from_bytes(buf.getvalue()[20:24], 'big'))\n\
             plt.show()",
        )
        .await;
    assert_eq!(run.done.status, CellStatus::Ok, "{run:?}");
    assert!(!run.stderr.contains("Fontconfig"), "{}", run.stderr);
    assert_eq!(run.outputs.len(), 1, "{:?}", run.outputs);
    let fig = &run.outputs[0];
    assert_eq!(fig.kind, OutputKind::Display);
    let png = base64::engine::general_purpose::STANDARD
        .decode(text(fig, "image/png"))
        .unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
    // IHDR: width and height, big-endian, at bytes 16..24.
    let (w, h) = (
        u32::from_be_bytes(png[16..20].try_into().unwrap()),
        u32::from_be_bytes(png[20..24].try_into().unwrap()),
    );
    assert_eq!(
        run.stdout,
        format!("{w} {h}\n"),
        "the figure's size in pixels"
    );
    assert!(
        (120..=240).contains(&w) && (100..=200).contains(&h),
        "{w}x{h}"
    );
    let file = fig.file.as_deref().expect("the figure's copy");
    assert_eq!(file, "output/figures/cell1-1.png");
    assert_eq!(std::fs::read(dir.path().join(file)).unwrap(), png);
    // The title is drawn with a real font: the PNG differs from the same
    // figure without it, above the axes.
    let drawn = a
        .cell(
            "from PIL import Image, ImageChops\n\
             plain = plt.figure(figsize=(4, 3), dpi=50)\n\
             plt.plot([1, 2, 3])\n\
             plt.title(' ', fontsize=20)\n\
             plain.savefig('plain.png', format='png', bbox_inches='tight')\n\
             plt.close(plain)\n\
             a, b = Image.open('output/figures/cell1-1.png').convert('L'), Image.open('plain.png').convert('L')\n\
             top = (0, 0, min(a.width, b.width), 25)\n\
             diff = ImageChops.difference(a.crop(top), b.crop(top))\n\
             sum(1 for p in diff.getdata() if p > 64)",
        )
        .await;
    let dark: u32 = drawn.done.result.as_deref().unwrap_or("0").parse().unwrap();
    assert!(dark > 50, "the title drew {dark} pixels: {drawn:?}");

    // A figure left open is shown after the cell, and closed.
    let open = a.cell("plt.figure(); plt.plot([3, 2, 1]);").await;
    assert_eq!(open.outputs.len(), 1, "{:?}", open.outputs);
    assert!(open.outputs[0].data.contains_key("image/png"));
    assert_eq!(
        a.ok("len(plt.get_fignums())").await.as_deref(),
        Some("0"),
        "shown figures are closed"
    );
}

#[tokio::test]
async fn hostile_reprs_cannot_break_the_agent_and_are_capped() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = ipython(dir.path()).await;
    let run = a
        .cell(
            "class Raises:\n\
             \x20   def _repr_html_(self): raise RuntimeError('no html')\n\
             \x20   def __repr__(self): return 'raises'\n\
             class Wrong:\n\
             \x20   def _repr_mimebundle_(self, include=None, exclude=None):\n\
             \x20       return {'text/plain': 7, 'image/png': ['x'], 'application/x-evil': 'e'}\n\
             \x20   def __repr__(self): return 'wrong'\n\
             class Huge:\n\
             \x20   def _repr_html_(self): return '<p>' + 'h' * (4 << 20)\n\
             \x20   def __repr__(self): return 'huge'\n\
             class BadPng:\n\
             \x20   def _repr_png_(self): return 'not a png'\n\
             \x20   def __repr__(self): return 'badpng'\n\
             from IPython.display import display\n\
             display(Raises()); display(Wrong()); display(Huge()); display(BadPng())\n\
             print('survived')",
        )
        .await;
    assert_eq!(run.done.status, CellStatus::Ok, "{run:?}");
    assert!(run.stdout.ends_with("survived\n"), "{run:?}");
    let plain: Vec<&str> = run.outputs.iter().map(|o| text(o, "text/plain")).collect();
    // A text/plain that is not text is left out (and said to be).
    assert_eq!(plain, ["raises", "", "huge", "badpng"], "{:?}", run.outputs);
    let wrong = &run.outputs[1];
    assert!(wrong.cut, "{wrong:?}");
    assert!(!wrong.data.contains_key("application/x-evil"));
    assert!(!wrong.data.contains_key("image/png"), "{wrong:?}");
    let huge = &run.outputs[2];
    assert!(huge.cut && !huge.data.contains_key("text/html"), "{huge:?}");
    let bad_png = &run.outputs[3];
    assert!(
        bad_png.cut && !bad_png.data.contains_key("image/png"),
        "{bad_png:?}"
    );

    // Past the count, outputs are dropped and counted.
    let many = a
        .cell(&format!("for i in range({}): display(i)", OUTPUTS_MAX + 5))
        .await;
    assert_eq!(many.outputs.len(), OUTPUTS_MAX);
    assert_eq!(many.done.outputs_dropped, 5);
    assert_eq!(a.ok("'still here'").await.as_deref(), Some("'still here'"));
}

#[tokio::test]
async fn without_the_layer_cells_run_as_plain_python() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = Live::start(dir.path()).await;
    assert_eq!(a.ready.ipython, None);
    assert_eq!(a.ready.ipython_error, None);
    let run = a.cell("x = 1\nx + 1;").await;
    assert_eq!(
        run.done.result.as_deref(),
        Some("2"),
        "no IPython: ; is Python's"
    );
    assert!(run.outputs.is_empty());
}
