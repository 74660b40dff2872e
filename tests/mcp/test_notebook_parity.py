"""A PRIMS session behaves like a Jupyter notebook.

The same cells run twice: once in a real notebook (nbformat) executed by
nbclient on a real ipykernel, and once, one `run_code` per cell, in ONE
PRIMS session through the real Python MCP SDK. Per cell the test compares
what a notebook user sees: stdout, stderr (of cells that did not fail), the
text/plain of the execute_result, the mime types of every display output in
order (and that each image is a real PNG), and the name of the exception.

Timings (`%time`, `%timeit`) and object addresses differ from run to run,
so those are compared by shape: every number-with-unit and every `0x...`
address is replaced by a placeholder on both sides before comparing.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field

import nbformat
import pytest
from nbclient import NotebookClient

from prims_test_util import connect, describe

# A 2x2 red PNG, built in the cell itself (the same bytes on both sides).
MAKE_PNG = """\
import struct, zlib
def _chunk(kind, data):
    body = kind + data
    return struct.pack('>I', len(data)) + body + struct.pack('>I', zlib.crc32(body))
png = (b'\\x89PNG\\r\\n\\x1a\\n'
       + _chunk(b'IHDR', struct.pack('>IIBBBBB', 2, 2, 8, 2, 0, 0, 0))
       + _chunk(b'IDAT', zlib.compress(b'\\x00\\xff\\x00\\x00\\xff\\x00\\x00' * 2))
       + _chunk(b'IEND', b''))
len(png) > 0
"""

# pip's words differ from uv's (and ipykernel's %pip adds a note about
# restarting): what a %pip cell prints is compared by whether it says the
# package is installed; the next cell imports it with the state kept.
PIP_CELL = "%pip install tomli-w==1.1.0"
PIP_SAID = re.compile(r"Successfully installed tomli[-_]w-1\.1\.0|Requirement already satisfied: tomli[-_]w")


# A figure's data, which only PRIMS sends (beside the PNG both send).
CHART = "application/vnd.prims.chart+json"


def pip_shape(seen: "Seen") -> "Seen":
    seen.stdout = "<installed>" if PIP_SAID.search(seen.stdout) else seen.stdout
    if seen.stderr is not None and "WARNING" in seen.stderr and "ERROR" not in seen.stderr:
        seen.stderr = ""
    return seen


CELLS = [
    'print("hello")',
    "40 + 2",
    "41 + 1;",
    "_",
    "'a' * 3",
    "__",
    "Out[2]",
    "from IPython.display import display, Markdown, HTML, JSON, Image\n"
    "display(1, 'two', [3])",
    "display(Markdown('**bold**'), HTML('<b>html</b>'), JSON({'a': [1, 2]}))",
    "HTML('<i>the last value</i>')",
    MAKE_PNG,
    "display(Image(data=png))",
    "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()",
    "fig = plt.figure(figsize=(2, 2))\nplt.plot([3, 1, 2]);",
    "plt.plot([1, 3])",
    "%time sum(range(1000))",
    "%timeit -n1 -r1 sum(range(100))",
    "%%capture cap\nprint('captured')\ndisplay(HTML('<p>hidden</p>'))",
    "print(cap.stdout.strip(), len(cap.outputs))",
    "%%writefile notes.txt\nline one\nline two",
    "print(open('notes.txt').read())",
    "!echo shell says hi",
    "x = !echo hi\nx",
    "import sys\nprint('to stderr', file=sys.stderr)\n'fine'",
    "undefined_name",
    "1 / 0",
    "def broken(:\n    pass",
    "print('after the errors', Out[2], x)",
    PIP_CELL,
    "import tomli_w\nprint(tomli_w.dumps({'a': 1}), x)",
    # Two displays in one line of one cell are two outputs.
    "display(1); display('two')",
    # `!ls /` lists the jail's root as a notebook user expects.
    "files = !ls /\n'usr' in files and 'tmp' in files",
]

# Placeholders for what differs from run to run: durations and addresses.
# IPython writes micro as U+03BC (μ) where the terminal can show it, else "us".
DURATION = re.compile(r"\d+(?:\.\d+)?(?:e[+-]?\d+)?\s*(?:ns|[µμ]s|us|ms|s|min|h)\b")
ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
# The exception line that ends a traceback: `NameError: ...` or `KeyboardInterrupt`.
EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Warning))\b(?::|$)")


def shape(text: str) -> str:
    # ipykernel runs `!cmd` on a pty, whose line discipline turns "\n" into
    # "\r\n"; the jail has no pty, so a command's output is what it wrote.
    # The line endings are compared as "\n" on both sides.
    text = text.replace("\r\n", "\n")
    return ADDRESS.sub("0x…", DURATION.sub("<duration>", text))


@dataclass
class Seen:
    """What one cell showed, in comparable form."""

    stdout: str = ""
    stderr: str | None = None
    result: str | None = None
    # (kind, sorted mime types) of every display and result output, in order.
    outputs: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    ename: str | None = None


def is_png(b64: str) -> bool:
    try:
        return base64.b64decode(b64, validate=True).startswith(b"\x89PNG\r\n\x1a\n")
    except ValueError:
        return False


def from_notebook(cell) -> Seen:
    seen = Seen(stderr="")
    for out in cell.outputs:
        kind = out.output_type
        if kind == "stream":
            if out.name == "stdout":
                seen.stdout += out.text
            else:
                seen.stderr += out.text
        elif kind in ("display_data", "execute_result"):
            data = out.data
            if "image/png" in data:
                assert is_png(data["image/png"]), f"ipykernel sent an image/png that is no PNG: {cell.source!r}"
            tag = "result" if kind == "execute_result" else "display"
            seen.outputs.append((tag, tuple(sorted(data))))
            if kind == "execute_result":
                seen.result = data.get("text/plain")
        elif kind == "error":
            seen.ename = out.ename
    if seen.ename is not None:
        # A failed cell's traceback is an error output in Jupyter and stderr
        # in PRIMS: the exception names are compared instead.
        seen.stderr = None
    seen.stdout, seen.result = shape(seen.stdout), seen.result and shape(seen.result)
    if seen.stderr is not None:
        seen.stderr = shape(seen.stderr)
    return seen


def from_prims(sc: dict) -> Seen:
    seen = Seen(stdout=sc["stdout"], stderr=sc["stderr"])
    for out in sc.get("outputs", []):
        data = out["data"]
        assert not out.get("cut"), f"an output was cut: {out}"
        if "image/png" in data:
            assert is_png(data["image/png"]), f"PRIMS sent an image/png that is no PNG: {out}"
        # A figure's chart data is PRIMS's own (docs/tools.md, "Chart data"),
        # beside the PNG a notebook has too.
        if CHART in data:
            assert "image/png" in data, f"chart data without its figure: {out}"
            data = {k: v for k, v in data.items() if k != CHART}
        seen.outputs.append((out["type"], tuple(sorted(data))))
        if out["type"] == "result":
            seen.result = data.get("text/plain")
    if sc["status"] == "error":
        names = [m.group(1) for line in sc["stderr"].splitlines() if (m := EXC_LINE.match(line))]
        seen.ename = names[-1] if names else "<no exception line in stderr>"
        seen.stderr = None
    else:
        assert sc["status"] == "ok", f"status {sc['status']!r}: {sc}"
    if (sc.get("result") or None) != (seen.result or None):
        raise AssertionError(f"`result` {sc.get('result')!r} is not the result output's text/plain {seen.result!r}")
    seen.stdout, seen.result = shape(seen.stdout), seen.result and shape(seen.result)
    if seen.stderr is not None:
        seen.stderr = shape(seen.stderr)
    return seen


async def run_in_notebook(tmp_path) -> list[Seen]:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in CELLS]
    client = NotebookClient(
        nb,
        kernel_name="python3",
        timeout=120,
        allow_errors=True,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    await client.async_execute()
    return [pip_shape(from_notebook(c)) if c.source == PIP_CELL else from_notebook(c) for c in nb.cells]


async def run_in_prims(server) -> list[Seen]:
    seen = []
    async with connect(server, "auto") as c:
        sid = None
        for i, src in enumerate(CELLS):
            args = {"code": src} if sid is None else {"code": src, "session_id": sid}
            r = await c.call_tool("run_code", args)
            sc = r.structured_content
            assert isinstance(sc, dict), f"cell {i}: no structured content: {describe(r)}"
            sid = sc["session_id"]
            if i > 0:
                assert sc["state"] == "kept", f"cell {i}: the interpreter was not kept: {sc}"
            seen.append(pip_shape(from_prims(sc)) if src == PIP_CELL else from_prims(sc))
    return seen


async def test_cells_give_the_outputs_of_a_real_ipykernel(server, tmp_path, monkeypatch, capsys):
    # Both sides start with an empty matplotlib cache, so whatever matplotlib
    # says while it builds one is said on both.
    (tmp_path / "mpl").mkdir()
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "mpl"))
    (tmp_path / "nb").mkdir()
    reference = await run_in_notebook(tmp_path / "nb")
    prims = await run_in_prims(server)

    differ = []
    for i, (src, want, got) in enumerate(zip(CELLS, reference, prims)):
        if want != got:
            differ.append(f"cell {i} {src!r}:\n  ipykernel: {want}\n  PRIMS:     {got}")
    summary = f"{len(CELLS) - len(differ)} of {len(CELLS)} cells give the same outputs"
    with capsys.disabled():
        print("\n" + summary)
        for d in differ:
            print(d)
    assert not differ, summary + "\n" + "\n".join(differ)

    # The reference itself shows what the cells are for (a test that could
    # not fail would prove nothing).
    assert reference[1].result == "42" and reference[2].result is None
    assert reference[6].result == "42", "Out[2] is the second cell's value"
    assert [k for k, _ in reference[7].outputs] == ["display"] * 3
    assert ("display", ("image/png", "text/plain")) in reference[12].outputs
    assert reference[24].ename == "NameError" and reference[25].ename == "ZeroDivisionError"
    assert reference[26].ename == "SyntaxError"
    assert [k for k, _ in reference[30].outputs] == ["display"] * 2
    assert reference[31].result == "True"


@pytest.fixture(autouse=True)
def _ipykernel_is_real():
    import ipykernel

    assert ipykernel.__version__ == "6.29.5", ipykernel.__version__
