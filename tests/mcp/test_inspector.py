"""PRIMS through the MCP Inspector CLI (@modelcontextprotocol/inspector 2.12.0).

The CLI is the locally installed one (tests/mcp/node_modules, from setup.sh),
run with a throw-away HOME so no catalog or OAuth state is read or written.
Both of its protocol eras are exercised: `legacy` (its default for a URL
target) and `modern` (2026-07-28).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
INSPECTOR = HERE / "node_modules" / ".bin" / "mcp-inspector"


@pytest.fixture(params=["legacy", "modern"])
def era(request):
    return request.param


def inspector(server, tmp_path: Path, era: str, *args: str):
    if not INSPECTOR.exists():
        pytest.fail(f"{INSPECTOR} is missing: run tests/mcp/setup.sh", pytrace=False)
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {**os.environ, "HOME": str(home), "NO_COLOR": "1", "CI": "1"}
    cmd = [str(INSPECTOR), "--cli", server.url, "--transport", "http", "--protocol-era", era,
           "--format", "json", *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path,
                       stdin=subprocess.DEVNULL)
    where = f"\n$ {' '.join(cmd)}\n--- stdout ---\n{p.stdout[-3000:]}\n--- stderr ---\n{p.stderr[-3000:]}"
    assert p.returncode == 0, f"the Inspector CLI exited {p.returncode}{where}"
    try:
        return json.loads(p.stdout), where
    except ValueError:
        pytest.fail(f"the Inspector CLI printed no JSON object{where}", pytrace=False)


def find_key(value, key):
    """The first value stored under `key`, searching nested dicts and lists."""
    if isinstance(value, dict):
        if key in value:
            return value[key]
        value = list(value.values())
    if isinstance(value, list):
        for v in value:
            found = find_key(v, key)
            if found is not None:
                return found
    return None


def test_inspector_tools_list(server, tmp_path, era):
    out, where = inspector(server, tmp_path, era, "--method", "tools/list")
    tools = find_key(out, "tools")
    assert isinstance(tools, list), f"no tools list{where}"
    assert sorted(t["name"] for t in tools) == sorted(
        ["run_code", "list_dir", "preview_file", "mount_file", "persist_artifact",
         "fork_session", "checkpoint_session", "restore_checkpoint"]), where
    assert all(t.get("outputSchema") for t in tools), f"a tool has no outputSchema{where}"


def test_inspector_run_code(server, tmp_path, era):
    out, where = inspector(server, tmp_path, era, "--method", "tools/call", "--tool-name", "run_code",
                           "--tool-arg", "code=print(1)")
    sc = find_key(out, "structuredContent")
    assert isinstance(sc, dict), f"no structuredContent{where}"
    assert sc.get("stdout") == "1\n" and sc.get("exit_code") == 0, where
    assert find_key(out, "isError") in (None, False), where
