"""A session's runs as a Jupyter notebook: fetched through the MCP resource
and through `GET /sessions/<id>/notebook.ipynb`, validated with nbformat,
re-run top to bottom with nbclient (a real python3 ipykernel) to the same
text outputs; bounded by the policy; gone with its session."""

from __future__ import annotations

import json
import uuid

import httpx2
import nbformat
from nbclient import NotebookClient

from conftest import PrimsServer
from prims_test_util import connect, run, run_ok

PREFIX = "prims://sessions/"

CELLS = [
    "print('hello', 6 * 7)",
    "x = 20\nx + 22",
    "from IPython.display import Markdown, display\ndisplay(Markdown('**bold** words'))",
    "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()",
    "1 / 0",
]


def texts(nb) -> list[dict]:
    """Per code cell: its stdout, its text/plain results and its error name."""
    out = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        seen = {"stdout": "", "results": [], "ename": None, "displays": 0}
        for o in cell["outputs"]:
            kind = o["output_type"]
            if kind == "stream" and o["name"] == "stdout":
                seen["stdout"] += o["text"] if isinstance(o["text"], str) else "".join(o["text"])
            elif kind == "execute_result":
                seen["results"].append(o["data"]["text/plain"])
            elif kind == "display_data":
                seen["displays"] += 1
            elif kind == "error":
                seen["ename"] = o["ename"]
        out.append(seen)
    return out


async def http_notebook(server, session: str) -> httpx2.Response:
    async with httpx2.AsyncClient(timeout=60) as http:
        return await http.get(f"{server.base}/sessions/{session}/notebook.ipynb")


async def test_the_notebook_validates_and_reruns_to_the_same_outputs(server):
    async with connect(server, "auto") as c:
        sid = (await run_ok(c, CELLS[0]))["session_id"]
        for code in CELLS[1:]:
            # A figure's text content stands in for its image, so the
            # structured-content mirror check of run_ok does not apply.
            await run(c, code, session_id=sid)
        got = await c.read_resource(PREFIX + sid + "/notebook.ipynb")
        via_resource = json.loads(got.contents[0].text)
        assert got.contents[0].mime_type == "application/x-ipynb+json"

    resp = await http_notebook(server, sid)
    assert resp.status_code == 200, resp.text[:300]
    assert resp.headers["content-type"] == "application/x-ipynb+json"
    via_http = resp.json()
    assert via_http == via_resource

    nb = nbformat.from_dict(via_http)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.source for c in code] == CELLS
    assert [c.execution_count for c in code] == [1, 2, 3, 4, 5]
    exported = texts(nb)
    assert exported[0]["stdout"] == "hello 42\n"
    assert exported[1]["results"] == ["42"]
    assert exported[2]["displays"] == 1
    assert exported[3]["displays"] == 1
    png = [o for o in code[3].outputs if o.output_type == "display_data"][0]
    assert png.data["image/png"].startswith("iVBOR")
    assert exported[4]["ename"] == "ZeroDivisionError"

    rerun = nbformat.from_dict(json.loads(json.dumps(via_http)))
    NotebookClient(rerun, timeout=120, kernel_name="python3", allow_errors=True).execute()
    nbformat.validate(rerun)
    assert texts(rerun) == exported


async def test_unknown_sessions_are_refused_like_artifacts(server):
    other = uuid.uuid4().hex
    resp = await http_notebook(server, other)
    async with httpx2.AsyncClient(timeout=60) as http:
        art = await http.get(f"{server.base}/artifacts/x.txt", headers={"prims-session-id": other})
    assert resp.status_code == art.status_code == 404
    assert resp.text == art.text
    assert (await http_notebook(server, "not-a-session")).status_code == 404


async def test_the_history_is_bounded_and_goes_with_its_session():
    server = PrimsServer()
    try:
        with open(server.policy, "a") as f:
            f.write("history_cells = 2\n")
        server.start()
        async with connect(server, "legacy") as c:
            sid = (await run_ok(c, "print(1)"))["session_id"]
            for i in range(2, 5):
                await run_ok(c, f"print({i})")
            nb = (await http_notebook(server, sid)).json()
            nbformat.validate(nbformat.from_dict(nb))
            assert nb["cells"][0]["cell_type"] == "markdown"
            assert "2 earlier cells" in "".join(nb["cells"][0]["source"])
            assert [t["stdout"] for t in texts(nb)] == ["3\n", "4\n"]
            assert list(server.state_dir.glob("**/*.cells"))
        # Leaving the legacy session closed its workspace, and its history.
        assert (await http_notebook(server, sid)).status_code == 404
        assert not list(server.state_dir.glob("**/*.cells"))
    finally:
        server.stop()
