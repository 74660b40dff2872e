"""The exported notebook can neither act nor reach out, in the viewers that
render it.

One session displays hostile outputs through `run_code`, one cell per kind
of attack; the notebook is read through MCP (`resources/read`) and rendered
as viewers render it: nbconvert 7.17's HTML exporter with its `lab` and
`classic` templates (what `jupyter nbconvert --to html` does), and an
inline viewer that puts each output's HTML, SVG or rendered Markdown into
its page as it is (an editor's preview, a static site). Each page is served
by a listener on 127.0.0.1 and shown in headless Chromium
(pages/inspect.mjs). Every payload that acts or loads asks the listener for
`/hit/<kind>/...`, and a payload script also marks the page; the listener
counts every request. So "no script ran and nothing left the page" is a
count of zero, per page, and the page's DOM tells what outputs kept: outside
URLs, classes, positioning, shadowed globals.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import subprocess
import threading
from collections import Counter
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import nbformat
import pytest
from nbconvert import HTMLExporter
from nbconvert.filters.markdown import markdown2html

from prims_test_util import connect, describe, run

HERE = Path(__file__).resolve().parent
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", HERE.parent.parent / "target"))
OUT = TARGET / "test-outputs" / "notebook-inert"
PREFIX = "prims://sessions/"
PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c63f8cfc0f01f0005000201a5f6c3b80000000049454e44ae426082"
    )
).decode()

# A DataFrame's _repr_html_ (pandas 2.2), which the test servers' policy does not install.
PANDAS_TABLE = (
    '<div>\n<style scoped>\n    .dataframe tbody tr th:only-of-type {\n        vertical-align: middle;\n'
    '    }\n</style>\n<table border="1" class="dataframe">\n  <thead>\n    <tr style="text-align: right;">\n'
    '      <th></th>\n      <th>a</th>\n      <th>b</th>\n    </tr>\n  </thead>\n  <tbody>\n    <tr>\n'
    '      <th>0</th>\n      <td>1</td>\n      <td>x</td>\n    </tr>\n  </tbody>\n</table>\n</div>'
)

# How each page marks its code cells and, inside a cell, its output containers.
PAGES = {
    "lab": (".jp-CodeCell", ".jp-OutputArea-output"),
    "classic": (".code_cell", ".output_subarea"),
    "inline": (".cell", ".out"),
}


class Listener:
    """Serves the rendered pages and counts every other request by kind."""

    def __init__(self):
        self.pages: dict[str, bytes] = {}
        self.hits: list[str] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def answer(self):
                body = outer.pages.get(self.path)
                # The browser's own request for an icon is no output's.
                if body is None and self.path != "/favicon.ico":
                    with outer.lock:
                        outer.hits.append(self.path)
                self.send_response(200)
                body = body or b""
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_POST = do_HEAD = answer

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def taken(self) -> list[str]:
        with self.lock:
            hits, self.hits = self.hits, []
        return hits

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def cells(port: int) -> dict[str, str]:
    """Per kind of attack, the cell that displays it."""
    L = f"http://127.0.0.1:{port}"
    P = f"//127.0.0.1:{port}"

    def js(kind: str) -> str:
        return f"fetch('{L}/hit/{kind}/ran');document.documentElement.setAttribute('data-ran','{kind}')"

    def show(mime: str, *payloads: str) -> str:
        return "\n".join(
            f"display({{'text/plain': 'payload', {mime!r}: {p!r}}}, raw=True)" for p in payloads
        )

    svg = 'xmlns="http://www.w3.org/2000/svg" width="120" height="40"'
    md = js("markdown")
    own_repr = f'**md** <img src=x onerror="{md}">'
    return {
        # High: raw HTML in Markdown, and an object's own _repr_markdown_.
        "markdown": show(
            "text/markdown",
            f'<img src=x onerror="{md}">',
            f"some text <script>{md}</script>",
            f'<svg onload="{md}"></svg>',
            f"![img]({L}/hit/markdown/image) [link]({L}/hit/markdown/link)",
        )
        + "\nclass M:\n    def _repr_markdown_(self):\n"
        + f"        return {own_repr!r}\nM()",
        # Medium: outside, protocol-relative and relative URLs in HTML.
        "html_urls": show(
            "text/html",
            f'<img src="{L}/hit/html_urls/absolute"><img src="{P}/hit/html_urls/protocol">'
            f'<img src="/hit/html_urls/relative?x=1"><img src="hit/html_urls/bare.png">',
            f'<a href="https://127.0.0.1:{port}/hit/html_urls/https">h</a>'
            f'<a href="ftp://127.0.0.1/hit">f</a><a href="tel:123">t</a><a href="/hit/html_urls/r">r</a>',
        ),
        # Medium: outside CSS references in SVG (an inline viewer fetched them).
        "svg_css": show(
            "image/svg+xml",
            f'<svg {svg} style="background:url({L}/hit/svg_css/background)">'
            f'<rect width="9" height="9" fill="url({L}/hit/svg_css/fill#g)"/>'
            f'<rect width="9" height="9" style="fill:url({L}/hit/svg_css/style-fill#g)"/>'
            f'<rect width="9" height="9" mask="url({L}/hit/svg_css/mask#m)"/>'
            f'<rect width="9" height="9" clip-path="url({L}/hit/svg_css/clip#c)"/>'
            f'<path d="M0 0 L9 9" stroke="black" style="marker-start:url({L}/hit/svg_css/marker#k)"/>'
            f'<image width="9" height="9" href="{L}/hit/svg_css/image.png"/></svg>',
        ),
        # Low: an output over the whole page, by style or by a viewer's own class.
        "cover": show(
            "image/svg+xml",
            f'<svg {svg} style="position:fixed;top:0;left:0;width:100vw;height:100vh;z-index:99999">'
            '<rect width="100%" height="100%" fill="white"/></svg>',
        )
        + "\n"
        + show(
            "text/html",
            '<div class="jp-Dialog"><div class="jp-Dialog-content">'
            f'<a href="{L}/hit/cover/login">Your session expired: log in again</a></div></div>',
            '<div style="position:fixed;inset:0;z-index:10000">over</div>',
        ),
        # Low: DOM clobbering with ids and names.
        "clobber": show(
            "text/html",
            f'<a id="CONFIG" href="{L}/hit/clobber/a">c</a><img name="CONFIG2" src="data:image/png;base64,{PNG}">'
            '<form name="prims_clobber"></form><div id="jupyter">j</div>',
        )
        + "\n"
        + show("image/svg+xml", f'<svg {svg}><rect id="MathJax" width="9" height="9"/></svg>'),
        # What held in the review, kept in the set.
        "held": show(
            "text/html",
            f"<svg><p><style><img src=x onerror=\"{js('held')}\"></style></p></svg>",
            f"<math><mtext><table><mglyph><style><img src=x onerror=\"{js('held')}\">",
            f"<noscript><p title=\"</noscript><img src=x onerror=&quot;{js('held')}&quot;>\">",
            '<a href="jav&#x09;ascript:alert(1)">1</a><a href="JaVaScRiPt:alert(1)">2</a>'
            '<a href="&#106;avascript:alert(1)">3</a><a href=" javascript:alert(1)">4</a>',
            f"<a href=\"data:text/html,<script>{js('held')}</script>\">5</a>",
            f'<img srcset="{L}/hit/held/srcset 1x"><base href="{L}/hit/held/base/">',
            f'<meta http-equiv="refresh" content="0;url={L}/hit/held/refresh">',
            f'<link rel="stylesheet" href="{L}/hit/held/link.css">',
            f'<object data="{L}/hit/held/object"></object><embed src="{L}/hit/held/embed">',
            f'<iframe src="{L}/hit/held/iframe"></iframe>',
        )
        + "\n"
        + show(
            "image/svg+xml",
            f"<svg {svg}><script>{js('held')}</script></svg>",
            f'<svg {svg}><foreignObject width="9" height="9"><img xmlns="http://www.w3.org/1999/xhtml" '
            f"src=\"x\" onerror=\"{js('held')}\"/></foreignObject></svg>",
            f'<svg {svg}><use href="{L}/hit/held/use.svg#a"/></svg>',
            f'<svg {svg} xmlns:xlink="http://www.w3.org/1999/xlink"><a xlink:href="#x">'
            f'<set attributeName="href" to="javascript:alert(1)"/><text y="9">t</text></a>'
            f'<animate attributeName="href" values="{L}/hit/held/animate"/></svg>',
        ),
        # Real output stays drawn: a matplotlib figure as SVG (with a clip
        # path and a hatch), and a table as pandas writes it.
        "drawn": "%config InlineBackend.figure_formats = ['svg']\n"
        "import matplotlib.pyplot as plt\n"
        "plt.plot([1, 2, 3], [1, 4, 9], label='line')\n"
        "plt.fill_between([1, 2, 3], [0, 1, 2], hatch='//', alpha=0.3)\n"
        "plt.title('t')\nplt.legend()\nplt.show()\n" + show("text/html", PANDAS_TABLE),
    }


def inline_page(nb) -> str:
    """The page of a viewer that puts each output's richest form into its
    page as it is: HTML and SVG as markup, Markdown rendered to HTML."""
    out = ["<!doctype html><html><head><meta charset='utf-8'><title>inline</title></head><body>"]
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        out.append("<div class='cell'>")
        for o in cell.outputs:
            data = o.get("data", {})
            if "text/html" in data:
                body = data["text/html"]
            elif "image/svg+xml" in data:
                body = data["image/svg+xml"]
            elif "text/markdown" in data:
                body = markdown2html(data["text/markdown"])
            elif "image/png" in data:
                body = f"<img src='data:image/png;base64,{data['image/png']}'>"
            else:
                body = f"<pre>{escape(data.get('text/plain') or o.get('text', ''))}</pre>"
            out.append(f"<div class='out'>{body}</div>")
        out.append("</div>")
    out.append("</body></html>")
    return "".join(out)


def inspect(listener: Listener, name: str, html: str) -> dict:
    """`html` shown at the listener in Chromium: the DOM's report, and the
    requests it made to the listener (the page itself aside)."""
    path = f"/page/{name}.html"
    listener.pages[path] = html.encode()
    (OUT / f"{name}.html").write_text(html)
    cells_sel, outputs_sel = PAGES[name]
    page = {"name": name, "url": f"http://127.0.0.1:{listener.port}{path}", "cells": cells_sel, "outputs": outputs_sel}
    listener.taken()
    proc = subprocess.run(
        ["node", str(HERE / "pages" / "inspect.mjs"), "--pages", json.dumps([page]), "--out", str(OUT)],
        cwd=HERE, capture_output=True, text=True, timeout=300, check=False,
    )
    try:
        rep = json.loads(proc.stdout)
    except ValueError:
        pytest.fail(f"inspect.mjs printed no JSON (exit {proc.returncode}): {proc.stderr[-3000:]}", pytrace=False)
    assert proc.returncode == 0 and "pages" in rep, (rep, proc.stderr[-3000:])
    [report] = rep["pages"]
    report["hits"] = listener.taken()
    return report


@pytest.fixture(scope="module")
def exported(server):
    """The session's notebook, the raw outputs of its cells, and per page
    the report of its rendering."""
    assert shutil.which("node") and shutil.which("chromium"), "node and chromium: tests/mcp/setup.sh installs them"
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    listener = Listener()
    try:

        async def record():
            kinds, raw, sid = [], {}, None
            async with connect(server, "auto") as c:
                for kind, code in cells(listener.port).items():
                    r = await run(c, code, **({"session_id": sid} if sid else {}))
                    sc = r.structured_content
                    assert not r.is_error and sc["status"] == "ok", (kind, describe(r))
                    sid = sc["session_id"]
                    kinds.append(kind)
                    raw[kind] = sc["outputs"]
                got = await c.read_resource(PREFIX + sid + "/notebook.ipynb")
            return kinds, raw, got.contents[0].text

        kinds, raw, text = asyncio.run(record())
        (OUT / "exported.ipynb").write_text(text)
        nb = nbformat.reads(text, as_version=4)
        nbformat.validate(nb)
        pages = {}
        for template in ("lab", "classic"):
            html, _ = HTMLExporter(template_name=template).from_notebook_node(nb)
            pages[template] = inspect(listener, template, html)
        pages["inline"] = inspect(listener, "inline", inline_page(nb))
        yield {"kinds": kinds, "raw": raw, "nb": nb, "text": text, "pages": pages}
    finally:
        listener.close()


def cell_report(exported, page: str, kind: str) -> dict:
    rep = exported["pages"][page]
    i = exported["kinds"].index(kind)
    assert len(rep["cells"]) == len(exported["kinds"]), (page, len(rep["cells"]))
    return rep["cells"][i]


def hits(exported, page: str, kind: str) -> list[str]:
    return [h for h in exported["pages"][page]["hits"] if h.startswith(f"/hit/{kind}/")]


def assert_inert(exported, kind: str) -> None:
    """In every page: no request of this kind left the page, no payload
    script ran, and the cell's outputs keep no outside URL."""
    for page in PAGES:
        rep = exported["pages"][page]
        assert hits(exported, page, kind) == [], (page, rep["hits"])
        assert kind not in rep["ran"], (page, rep["ran"])
        c = cell_report(exported, page, kind)
        assert c["urls"] == [] and c["styleUrls"] == [], (page, c)


def test_markdown_outputs_run_nothing(exported):
    assert_inert(exported, "markdown")
    # Markdown became cleaned HTML: no viewer renders the raw text.
    i = exported["kinds"].index("markdown")
    code_cells = [c for c in exported["nb"].cells if c.cell_type == "code"]
    for o in code_cells[i].outputs:
        assert "text/markdown" not in o["data"] and "text/html" in o["data"], o
    # and it is still Markdown's rendering.
    assert "<strong>md</strong>" in code_cells[i].outputs[-1]["data"]["text/html"]


def test_html_outputs_load_and_link_nothing_outside(exported):
    assert_inert(exported, "html_urls")
    for page in PAGES:
        c = cell_report(exported, page, "html_urls")
        assert c["elements"] >= 8, (page, c)  # the images and links stay, without their URLs


def test_svg_outputs_keep_no_outside_css(exported):
    assert_inert(exported, "svg_css")


def test_no_output_covers_the_page_or_borrows_a_class(exported):
    for page in PAGES:
        c = cell_report(exported, page, "cover")
        assert c["positioned"] == [] and c["classes"] == [], (page, c)
    assert_inert(exported, "cover")


def test_no_output_shadows_a_global(exported):
    for page in PAGES:
        assert exported["pages"][page]["clobbered"] == [], page
    assert_inert(exported, "clobber")
    assert 'id="prims-out-CONFIG"' in exported["text"].replace('\\"', '"')


def test_what_held_still_holds(exported):
    assert_inert(exported, "held")
    for page in PAGES:
        # Nothing else asked the listener for anything either.
        assert exported["pages"][page]["hits"] == [], (page, exported["pages"][page]["hits"])
        assert exported["pages"][page]["ran"] == "", page


def test_plots_and_tables_stay_drawn(exported):
    i = exported["kinds"].index("drawn")
    [figure, table] = [o["data"] for o in exported["raw"]["drawn"]]
    code_cells = [c for c in exported["nb"].cells if c.cell_type == "code"]
    svg = code_cells[i].outputs[0]["data"]["image/svg+xml"]
    # Every path of the figure stays, with its colour and its clip inside the figure.
    assert svg.count("<path") == figure["image/svg+xml"].count("<path") > 10, svg[:500]
    assert "#1f77b4" in svg and 'clip-path="url(#prims-out-' in svg, svg[:2000]
    assert "url(#prims-out-h" in svg, "the hatch pattern's reference stays"
    html = code_cells[i].outputs[1]["data"]["text/html"]
    assert "<table" in html and "<td>x</td>" in html and 'class="dataframe"' in table["text/html"], html
    # Shown as an image (nbconvert) the figure decodes; inlined, it is drawn.
    for page in ("lab", "classic"):
        c = cell_report(exported, page, "drawn")
        assert (c["images"], c["broken"]) == (1, 0), (page, c)
    inline = cell_report(exported, "inline", "drawn")
    assert inline["elements"] > 50 and inline["positioned"] == [], inline
    # The metadata says what was done.
    assert "Markdown" in exported["nb"].metadata["prims"]["outputs"]
    assert Counter(o["output_type"] for o in code_cells[i].outputs) == {"display_data": 2}
