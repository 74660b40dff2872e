"""`prims serve` as a user runs it: it prints the URL and a client config, runs
the front-end as the dedicated `prims` user (never nobody), and SIGTERM stops
both the front-end and the supervisor (a private server, so the shared one is
untouched)."""

from __future__ import annotations

import pwd
import signal
import socket
import subprocess
import time

import pytest

from conftest import descendants, pid_alive

NOBODY_UID = 65534


def real_uid(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError(f"no Uid line for {pid}")


def cmdline(pid: int) -> list[str]:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]


def test_serve_prints_url_and_sigterm_stops_everything(fresh_server):
    s = fresh_server
    s.start()
    out = s.log(400)
    assert s.url in out, f"`prims serve` did not print its URL {s.url}:\n{out}"
    assert "mcp-remote" in out, f"`prims serve` printed no mcp-remote client config:\n{out}"

    kids = descendants(s.proc.pid)
    assert kids, "`prims serve` has no child process: where do the front-end and supervisor run?"
    # `prims serve` creates the `prims` system user when it is missing.
    prims = pwd.getpwnam("prims")
    assert prims.pw_uid not in (0, NOBODY_UID), f"the prims user has uid {prims.pw_uid}"
    assert prims.pw_shell.endswith("nologin"), f"the prims user can log in: {prims.pw_shell}"
    roles = {}
    for k in kids:
        args = cmdline(k)
        if len(args) > 1 and args[1] in ("mcp", "supervisor"):
            roles[args[1]] = real_uid(k)
    assert roles.get("mcp") == prims.pw_uid, (
        f"the front-end runs as uid {roles.get('mcp')}, not prims ({prims.pw_uid}): {roles}"
    )
    assert roles.get("supervisor") == 0, f"the supervisor is not root: {roles}"
    assert "front-end runs as prims" in out, out

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
