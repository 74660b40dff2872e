"""`prims serve` as a user runs it: it prints the URL and a client config, and
SIGTERM stops both the front-end and the supervisor (a private server, so the
shared one is untouched)."""

from __future__ import annotations

import signal
import socket
import subprocess
import time

import pytest

from conftest import descendants, pid_alive


def test_serve_prints_url_and_sigterm_stops_everything(fresh_server):
    s = fresh_server
    s.start()
    out = s.log(400)
    assert s.url in out, f"`prims serve` did not print its URL {s.url}:\n{out}"
    assert "mcp-remote" in out, f"`prims serve` printed no mcp-remote client config:\n{out}"

    kids = descendants(s.proc.pid)
    assert kids, "`prims serve` has no child process: where do the front-end and supervisor run?"

    s.proc.send_signal(signal.SIGTERM)
    try:
        rc = s.proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail(f"`prims serve` was still running 20 s after SIGTERM\n{s.log()}", pytrace=False)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(pid_alive(k) for k in kids):
        time.sleep(0.1)
    left = [k for k in kids if pid_alive(k)]
    assert not left, f"processes of `prims serve` outlived it by 10 s: {left}\n{s.log()}"
    assert rc in (0, 130, 143), f"`prims serve` exited with {rc} after SIGTERM (not a clean stop)\n{s.log()}"
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", s.port)) != 0, "the port still accepts connections"
