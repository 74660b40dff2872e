"""PRIMS through mcp-remote 0.15.1, the stdio-to-HTTP bridge Claude Desktop uses.

`mcp-remote <url> --transport http-only` is spawned as a child; the test
speaks newline-delimited JSON-RPC on its stdin/stdout like a stdio MCP host,
keeping stdin open until it has every answer.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from pathlib import Path

import pytest
from prims_test_util import TOOL_NAMES

HERE = Path(__file__).resolve().parent
MCP_REMOTE = HERE / "node_modules" / ".bin" / "mcp-remote"


class Bridge:
    def __init__(self, server, home: Path, argv: list[str] | None = None):
        if not MCP_REMOTE.exists():
            pytest.fail(f"{MCP_REMOTE} is missing: run tests/mcp/setup.sh", pytrace=False)
        self.stderr_path = home / "mcp-remote.stderr"
        env = {**os.environ, "HOME": str(home), "MCP_REMOTE_CONFIG_DIR": str(home / ".mcp-auth"),
               "NO_COLOR": "1"}
        self.proc = subprocess.Popen(
            argv or [str(MCP_REMOTE), server.url, "--transport", "http-only"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(self.stderr_path, "wb"),
            env=env, cwd=home,
        )
        self.lines: queue.Queue = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.decode(errors="replace"))
        self.lines.put(None)

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def send(self, msg: dict) -> None:
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def answer(self, request_id: int, timeout: float = 90) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                pytest.fail(f"no answer to request {request_id} within {timeout} s; stdout so far: "
                            f"{self.seen[-10:]}\n--- mcp-remote stderr ---\n{self.stderr()}", pytrace=False)
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                pytest.fail(f"mcp-remote exited ({self.proc.poll()}) before answering {request_id}\n"
                            f"--- mcp-remote stderr ---\n{self.stderr()}", pytrace=False)
            self.seen.append(line)
            try:
                msg = json.loads(line)
            except ValueError:
                continue  # not JSON-RPC (a stray log line)
            if msg.get("id") == request_id and ("result" in msg or "error" in msg):
                return msg

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def test_mcp_remote_bridge(server, tmp_path):
    bridge = Bridge(server, tmp_path)
    try:
        bridge.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "prims-tests-stdio-host", "version": "1.0"}}})
        init = bridge.answer(1)
        assert "result" in init, f"initialize failed through mcp-remote: {init}"
        assert init["result"].get("capabilities", {}).get("tools") is not None, init
        bridge.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

        bridge.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
        tools = bridge.answer(2)
        assert "result" in tools, tools
        assert {t["name"] for t in tools["result"]["tools"]} == TOOL_NAMES, tools

        bridge.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "run_code", "arguments": {"code": "print(1)"}}})
        call = bridge.answer(3)
        assert "result" in call, f"tools/call failed through mcp-remote: {call}"
        result = call["result"]
        assert not result.get("isError"), result
        assert result["structuredContent"]["stdout"] == "1\n", result
        assert result["structuredContent"]["exit_code"] == 0, result
        assert json.loads(next(c["text"] for c in result["content"] if c["type"] == "text")) \
            == result["structuredContent"], result
    finally:
        bridge.close()
