"""A matplotlib figure a cell shows comes back as a real picture.

`plt.show()` in a PRIMS session returns a PNG output that decodes (Pillow),
has the figure's size in pixels (figsize * dpi), and shows its text: a
figure holding only a big black label on white has dark pixels where the
same figure without the label has none, so fonts were found and text was
drawn. The figure is also a file under output/figures/ that list_dir lists
and preview_file previews, and matplotlib's start said nothing about
fontconfig.
"""

from __future__ import annotations

import base64
import io
import json

import nbformat
from PIL import Image

from prims_test_util import connect, describe, entries_of, ok

# The inline backend crops figures to their ink (bbox_inches="tight"), as in
# Jupyter; uncropped, a PNG has exactly the figure's size.
SETUP = """\
import matplotlib.pyplot as plt
%config InlineBackend.print_figure_kwargs = {'bbox_inches': None}
def label_figure(label):
    fig = plt.figure(figsize=(4, 2), dpi=50, facecolor='white')
    # An axes, even a hidden one: IPython (in Jupyter too) shows no image of
    # a figure without axes.
    ax = fig.add_axes([0, 0, 1, 1])
    ax.set_axis_off()
    if label:
        ax.text(0.5, 0.5, label, fontsize=48, color='black', ha='center', va='center')
    return fig
"""


def figure_output(sc: dict) -> dict:
    figures = [o for o in sc.get("outputs", []) if "image/png" in o["data"]]
    assert len(figures) == 1, f"expected one figure: {sc}"
    return figures[0]


def dark_pixels(png: bytes) -> tuple[tuple[int, int], int]:
    img = Image.open(io.BytesIO(png))
    img.load()
    assert img.format == "PNG"
    rgb = img.convert("RGBA")
    # Over white, as a viewer shows it.
    flat = Image.new("RGBA", rgb.size, (255, 255, 255, 255))
    flat.alpha_composite(rgb)
    gray = flat.convert("L")
    return img.size, sum(1 for v in gray.getdata() if v < 128)


async def test_a_shown_figure_is_a_real_png_with_its_text(server):
    async with connect(server, "auto") as c:
        r = await c.call_tool("run_code", {"code": SETUP})
        sc = r.structured_content
        assert sc and sc["status"] == "ok", describe(r)
        sid = sc["session_id"]
        assert "Fontconfig" not in sc["stderr"], sc["stderr"]

        shown = {}
        for label in ("PRIMS", ""):
            r = await c.call_tool(
                "run_code",
                {"code": f"label_figure({label!r})\nplt.show()", "session_id": sid},
            )
            sc = r.structured_content
            assert sc and sc["status"] == "ok" and sc["state"] == "kept", describe(r)
            assert "Fontconfig" not in sc["stderr"], sc["stderr"]
            out = figure_output(sc)
            assert out["type"] == "display" and not out.get("cut"), out
            png = base64.b64decode(out["data"]["image/png"])
            # The figure is also image content, byte for byte.
            images = [b for b in r.content if getattr(b, "type", "") == "image"]
            assert [(b.mime_type, b.data) for b in images] == [("image/png", out["data"]["image/png"])], r.content
            shown[label] = (png, out["file"])

        (png_text, file_text), (png_blank, _) = shown["PRIMS"], shown[""]
        size, dark = dark_pixels(png_text)
        assert size == (4 * 50, 2 * 50), f"the PNG is {size}, the figure 4x2 inches at 50 dpi"
        blank_size, blank_dark = dark_pixels(png_blank)
        assert blank_size == size and blank_dark == 0, (blank_size, blank_dark)
        # A 48 pt label over 200x100 pixels covers hundreds of them.
        assert dark > 300, f"only {dark} dark pixels: the label was not drawn"

        assert file_text.startswith("output/figures/") and file_text.endswith(".png"), file_text
        listing = ok(await c.call_tool("list_dir", {"dir_path": "output/figures", "session_id": sid}))
        names = {e.get("name") or e.get("path", "").rsplit("/", 1)[-1] for e in entries_of(listing)}
        assert file_text.rsplit("/", 1)[1] in names, listing
        # The file holds the very PNG the output showed.
        r = await c.call_tool(
            "run_code",
            {"code": f"open({file_text!r}, 'rb').read() == __import__('base64').b64decode({base64.b64encode(png_text).decode()!r})",
             "session_id": sid},
        )
        assert r.structured_content["result"] == "True", describe(r)
        pv = ok(await c.call_tool("preview_file", {"relative_path": file_text, "session_id": sid}))
        assert (pv["mime"], pv["binary"], pv["size"]) == ("image/png", True, len(png_text)), pv


CHART = "application/vnd.prims.chart+json"

BAR_CHART = """\
import matplotlib.pyplot as plt
plt.figure(figsize=(4, 3), dpi=50)
plt.bar(['Author A', 'Author B', 'Author C'], [100, 200, 300], label='Books Sold')
plt.title('Book Sales'); plt.xlabel('Authors'); plt.ylabel('Sold (books)')
plt.yticks([0, 300])
plt.show()
"""

BAR_CHART_DATA = {
    "type": "bar",
    "title": "Book Sales",
    "x_label": "Authors",
    "x_unit": None,
    "x_scale": "categorical",
    "x_ticks": [0.0, 1.0, 2.0],
    "x_tick_labels": ["Author A", "Author B", "Author C"],
    "y_label": "Sold (books)",
    "y_unit": "books",
    "y_scale": "linear",
    "y_ticks": [0.0, 300.0],
    "y_tick_labels": ["0", "300"],
    "elements": [
        {"label": "Author A", "group": "Books Sold", "value": 100.0},
        {"label": "Author B", "group": "Books Sold", "value": 200.0},
        {"label": "Author C", "group": "Books Sold", "value": 300.0},
    ],
}


async def test_a_bar_chart_comes_with_its_data_in_the_output_and_the_notebook(server):
    async with connect(server, "auto") as c:
        r = await c.call_tool("run_code", {"code": BAR_CHART})
        sc = r.structured_content
        assert sc and sc["status"] == "ok", describe(r)
        sid = sc["session_id"]
        out = figure_output(sc)
        # The chart's data beside its PNG, in the same output.
        assert sorted(out["data"]) == [CHART, "image/png", "text/plain"], out
        assert out["data"][CHART] == BAR_CHART_DATA
        assert not out.get("cut"), out
        # The JSON text mirror has it too; it is no text block of its own,
        # and the figure is one image.
        mirror = [json.loads(b.text) for b in r.content if getattr(b, "type", "") == "text"]
        assert len(mirror) == 1, r.content
        assert mirror[0]["outputs"][0]["data"][CHART] == BAR_CHART_DATA
        images = [b for b in r.content if getattr(b, "type", "") == "image"]
        assert [b.data for b in images] == [out["data"]["image/png"]], r.content

        got = await c.read_resource(f"prims://sessions/{sid}/notebook.ipynb")
        nb = json.loads(got.contents[0].text)
    # nbformat takes a +json mime type's value as JSON.
    nbformat.validate(nbformat.from_dict(nb))
    cells = [cell for cell in nb["cells"] if cell["cell_type"] == "code"]
    assert [cell["source"] for cell in cells] == [BAR_CHART]
    shown = [o for o in cells[0]["outputs"] if o["output_type"] == "display_data"]
    assert len(shown) == 1, cells[0]["outputs"]
    # JSON in the notebook too, not its text.
    assert shown[0]["data"][CHART] == BAR_CHART_DATA
    assert shown[0]["data"]["image/png"] == out["data"]["image/png"]
