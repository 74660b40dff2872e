"""The render benchmark of the run_code view (not a timed test).

Starts a `prims serve` like tests/mcp does (conftest.py's test policy), or
uses --url, and runs `render.mjs --bench N`: one run_code result with a
1,000-row pandas DataFrame and a matplotlib figure, shown N times in a fresh
view in headless chromium, timed from the host's sendToolResult to the view's
"rendered" message (DOM built, images decoded, a frame laid out). Prints
p50/min/max and the view's size in bytes; the JSON lands in
target/test-outputs/app-view-bench/bench.json.

    tests/mcp/setup.sh && scripts/ipython-site.sh && cargo build --workspace --bins
    sudo target/mcp-test-venv/bin/python tests/mcp/app/bench.py [--rounds 20] [--url URL]

Needs root, like tests/mcp (PRIMS_BIN picks another binary).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from contextlib import nullcontext
from pathlib import Path

HERE = Path(__file__).resolve().parent
MCP_TESTS = HERE.parent
REPO = MCP_TESTS.parent.parent
sys.path.insert(0, str(MCP_TESTS))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--url", help="an already running server's /mcp URL")
    args = ap.parse_args()
    out = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target")) / "test-outputs" / "app-view-bench"
    out.mkdir(parents=True, exist_ok=True)
    if args.url:
        ctx = nullcontext(None)
    else:
        from conftest import running_server  # the tests' server: test policy, own state dir

        ctx = running_server()
    with ctx as server:
        url = args.url or server.url
        proc = subprocess.run(
            ["node", str(HERE / "render.mjs"), "--url", url, "--out", str(out), "--bench", str(args.rounds)],
            cwd=MCP_TESTS, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False,
        )
    summary = [line for line in proc.stderr.splitlines() if not line.startswith("unknown format")]
    print("\n".join(summary))
    print(f"(report: {out / 'bench.json'})")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
