"""The client set-ups in README.md, run as written against a real server.

Each README block follows a `<!-- client: NAME -->` marker. The tests take
the block's text, swap the default URL for the test server's, swap `npx
<package>` for the same pinned package installed by setup.sh (so no npm
download happens mid-test), and run it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from test_mcp_remote import MCP_REMOTE, Bridge
from test_inspector import INSPECTOR, find_key

HERE = Path(__file__).resolve().parent
README = HERE.parent.parent / "README.md"
DEFAULT_URL = "http://127.0.0.1:9000/mcp"
PYTHON = HERE.parent.parent / "target" / "mcp-test-venv" / "bin" / "python"


def snippet(name: str) -> str:
    text = README.read_text()
    m = re.search(r"<!-- client: " + re.escape(name) + r" -->\s*```[a-z]*\n(.*?)```", text, re.S)
    assert m, f"README.md has no block after <!-- client: {name} -->"
    assert DEFAULT_URL in m.group(1), f"the {name} block does not use {DEFAULT_URL}"
    return m.group(1)


def test_readme_claude_desktop_config_through_mcp_remote(server, tmp_path):
    config = json.loads(snippet("claude-desktop"))
    entry = config["mcpServers"]["prims"]
    assert entry["command"] == "npx", entry
    args = entry["args"]
    assert args[:2] == ["-y", "mcp-remote"], args
    argv = [str(MCP_REMOTE)] + [server.url if a == DEFAULT_URL else a for a in args[2:]]
    bridge = Bridge(server, tmp_path, argv)
    try:
        bridge.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "claude-desktop-like-host", "version": "1.0"}}})
        assert "result" in bridge.answer(1)
        bridge.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        bridge.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "run_code", "arguments": {"code": "print(6 * 7)"}}})
        call = bridge.answer(2)
        assert call["result"]["structuredContent"]["stdout"] == "42\n", call
    finally:
        bridge.close()


def test_readme_cursor_config_names_the_endpoint():
    # Cursor itself cannot run here; its config is only the URL, which every
    # other test in this directory drives with real clients.
    config = json.loads(snippet("cursor"))
    assert config == {"mcpServers": {"prims": {"url": DEFAULT_URL}}}, config


def test_readme_python_sdk_script(server, tmp_path):
    script = tmp_path / "client.py"
    script.write_text(snippet("python-sdk").replace(DEFAULT_URL, server.url))
    p = subprocess.run([str(PYTHON), str(script)], capture_output=True, text=True, timeout=180,
                       cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    assert "hello from the jail" in p.stdout, p.stdout


def test_readme_inspector_command(server, tmp_path):
    argv = shlex.split(snippet("inspector").strip())
    assert argv[:2] == ["npx", "@modelcontextprotocol/inspector"], argv
    argv = [str(INSPECTOR)] + [server.url if a == DEFAULT_URL else a for a in argv[2:]]
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "NO_COLOR": "1", "CI": "1"}
    p = subprocess.run(argv, capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    sc = find_key(json.loads(p.stdout), "structuredContent")
    assert sc["stdout"] == "1\n", p.stdout
