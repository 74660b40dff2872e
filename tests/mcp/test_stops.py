"""Nothing is lost at a stop: every way a server stops keeps each session's
variables, with the default policy.

A real `prims serve` (its own process group, as conftest starts it, as a
shell starts a command) gets the signal as a terminal or a process manager
sends it: SIGINT to the whole group (Ctrl-C), SIGTERM to the whole group (a
process manager), SIGTERM to the supervisor alone; or it crashes (SIGKILL
to it and to every process under it, jails included, at once). Then
it starts again on the same state directory, and the session's next call
finds its variable, its cell-defined function and class, and says how:
`state_reason` server_restarted, `saved_at`, `last_run_lost`. A call that
runs at a graceful stop ends with status "stopped" and a note, and its
session keeps what it had.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from datetime import datetime, timezone

import pytest

from conftest import PrimsServer, descendants, running_server
from prims_test_util import connect, describe, run, run_ok

DEFINE = (
    "x = 41\n"
    "def f(n):\n"
    "    return n + 1\n"
    "class C:\n"
    "    v = 'cell class'\n"
)
CHECK = "print(f(x), C.v)"


@pytest.fixture
def own_server():
    """A server of the test's own, which it may stop and start again."""
    with running_server() as s:
        yield s


async def define(server) -> str:
    async with connect(server, "auto") as c:
        sc = await run_ok(c, DEFINE)
        assert sc["status"] == "ok", sc
        return sc["session_id"]


async def check_after_restart(server, sid: str) -> dict:
    async with connect(server, "auto") as c:
        sc = await run_ok(c, CHECK, session_id=sid)
    assert sc["status"] == "ok", sc
    assert sc["stdout"] == "42 cell class\n", sc
    assert sc["state_reason"] == "server_restarted", sc
    assert {"x", "f", "C"} <= set(sc["restored"]), sc
    assert sc.get("saved_at"), sc
    return sc


def stop_group(server: PrimsServer, sig: int, within: float = 60) -> int:
    """`sig` to the server's whole process group; its exit status."""
    assert server.proc is not None
    os.killpg(server.proc.pid, sig)
    return server.proc.wait(timeout=within)


def restart(server: PrimsServer) -> None:
    """Starts the server again on the same state directory (new port)."""
    # Nothing of the old server may be left: its jails ended with it.
    server.start()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
async def test_a_signal_to_the_servers_group_keeps_every_session(own_server, sig):
    sid = await define(own_server)
    before = time.time()
    status = await asyncio.to_thread(stop_group, own_server, sig)
    assert status == 0, own_server.log()
    assert "saved" in own_server.log(200), own_server.log()
    restart(own_server)
    sc = await check_after_restart(own_server, sid)
    saved = datetime.fromisoformat(sc["saved_at"].replace("Z", "+00:00"))
    assert saved.timestamp() >= before - 1, sc
    assert not sc.get("last_run_lost"), sc


async def test_sigterm_to_the_supervisor_alone_keeps_every_session(own_server):
    sid = await define(own_server)
    assert own_server.proc is not None
    kids = [p for p in descendants(own_server.proc.pid) if b" supervisor " in _cmdline(p)]
    assert len(kids) == 1, kids
    os.kill(kids[0], signal.SIGTERM)
    # prims serve sees its supervisor end, and stops the front-end.
    await asyncio.to_thread(own_server.proc.wait, 60)
    restart(own_server)
    await check_after_restart(own_server, sid)


async def test_a_call_running_at_a_stop_is_answered_and_its_session_kept(own_server):
    async with connect(own_server, "auto") as c:
        sid = (await run_ok(c, DEFINE))["session_id"]

        async def long_call():
            return await run(c, "import time\nx = 43\ntime.sleep(60)", session_id=sid)

        call = asyncio.create_task(long_call())
        await asyncio.sleep(3)
        await asyncio.to_thread(stop_group, own_server, signal.SIGINT)
        r = await asyncio.wait_for(call, 30)
    sc = r.structured_content
    assert sc and sc["status"] == "stopped", describe(r)
    assert "server is stopping" in sc["stderr"] and "KeyboardInterrupt" in sc["stderr"], sc
    assert "stopped while this call ran" in sc["feedback"], sc
    restart(own_server)
    async with connect(own_server, "auto") as c:
        sc = await run_ok(c, CHECK, session_id=sid)
    # The interrupted cell's assignment before its sleep stands.
    assert sc["stdout"] == "44 cell class\n", sc
    assert sc["state_reason"] == "server_restarted" and not sc.get("last_run_lost"), sc


async def test_a_crash_loses_at_most_the_autosave_interval(own_server):
    """SIGKILL to the whole group: the OOM killer, a stop timeout, a
    power cut. With the default policy (`interpreters.autosave_after`,
    10 s) the session's save is on record well within 30 s of its call."""
    sid = await define(own_server)
    ended = time.monotonic()
    record = _session_meta(own_server, sid)
    deadline = ended + 30
    while "saved_at" not in json.loads(record.read_text()):
        assert time.monotonic() < deadline, "no autosave within 30 s of the call"
        await asyncio.sleep(0.2)
    took = time.monotonic() - ended
    assert took < 15, f"the autosave came {took:.1f} s after the call"
    # A call still running at the crash is lost, and its next call says so.
    # The client sees its connection drop (the call, then the client's own
    # goodbye at the end of the block, fail): that is the crash's mark.
    # The client's reader sees the connection drop as the crash happens and
    # cancels the block (the wait for crash() among it: the thread goes on).
    with pytest.raises(BaseException):
        async with connect(own_server, "auto") as c:
            call = asyncio.create_task(run(c, "import time\ntime.sleep(60)", session_id=sid))
            await asyncio.sleep(3)
            await asyncio.to_thread(crash, own_server)
            await asyncio.wait_for(call, 30)
    assert own_server.proc is not None
    assert await asyncio.to_thread(own_server.proc.wait, 30) == -signal.SIGKILL
    restart(own_server)
    sc = await check_after_restart(own_server, sid)
    assert sc.get("last_run_lost") is True, sc
    assert "never finished" in sc["feedback"], sc


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ")
    except OSError:
        return b""


def _session_meta(server: PrimsServer, sid: str):
    """The session's metadata file. The state directory names sessions by
    a keyed hash of their id; the test's server has one session that ran
    code (the pool's spares never did)."""
    found = []
    for meta in server.state_dir.rglob("*.json"):
        try:
            m = json.loads(meta.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(m, dict) and "host_uid" in m and m.get("ran"):
            found.append(meta)
    assert len(found) == 1, (sid, found)
    return found[0]


def crash(server: PrimsServer) -> None:
    """SIGKILL to the server and every process under it at once: what a
    power cut leaves, with no process the chance to save anything."""
    assert server.proc is not None
    everyone = [server.proc.pid, *descendants(server.proc.pid)]
    for pid in everyone:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    server.proc.wait(timeout=30)


# ---------------------------------------------------------------- what was lost, said


def _with_policy(server: PrimsServer, extra: str) -> None:
    server.policy.write_text(server.policy.read_text() + extra)


def _server_with(extra: str):
    s = PrimsServer()
    _with_policy(s, extra)
    try:
        s.start()
        yield s
    finally:
        s.stop()


@pytest.fixture
def quick_idle_server():
    """A server whose interpreters stop after 2 s idle."""
    yield from _server_with("[interpreters]\nidle_ttl = \"2s\"\n")


@pytest.fixture
def few_live_server():
    """A server whose client may keep 3 interpreters live, and fork up to
    8: a fork of 3 would stop its own branches."""
    yield from _server_with("[interpreters]\nmax_live_per_tenant = 3\n[branches]\nmax_forks = 8\n")


async def _tool(c, name: str, **args) -> dict:
    r = await c.call_tool(name, args)
    assert not r.is_error, describe(r)
    return r.structured_content


async def test_a_fork_the_client_cannot_keep_live_is_refused(few_live_server):
    async with connect(few_live_server, "auto") as c:
        sid = (await run_ok(c, DEFINE))["session_id"]
        r = await c.call_tool("fork_session", {"session_id": sid, "count": 3})
        assert r.is_error, describe(r)
        assert "fork at most 2" in describe(r) and "max_live_per_tenant" in describe(r), describe(r)
        got = await _tool(c, "fork_session", session_id=sid, count=2)
        ids = [b["session_id"] for b in got["sessions"]]
        # The source and both branches are live together: none was stopped.
        for s in [sid, *ids]:
            sc = await run_ok(c, CHECK, session_id=s)
            assert sc["stdout"] == "42 cell class\n" and sc["state"] == "kept", sc


async def test_a_stopped_sessions_fork_and_checkpoint_name_what_its_stop_dropped(quick_idle_server):
    async with connect(quick_idle_server, "auto") as c:
        sid = (await run_ok(c, DEFINE + "gen = (i for i in range(3))\n"))["session_id"]
        # Idle past interpreters.idle_ttl: the interpreter stops, saving
        # what it can.
        await asyncio.sleep(5)
        cp = await _tool(c, "checkpoint_session", session_id=sid)
        assert "gen" in cp["not_saved"], cp
        forked = await _tool(c, "fork_session", session_id=sid)
        branch = forked["sessions"][0]
        assert {"x", "f", "C"} <= set(branch["restored"]), forked
        assert "gen" in branch["not_restored"], forked
        back = await _tool(c, "restore_checkpoint", session_id=sid, checkpoint_id=cp["checkpoint_id"])
        assert "gen" in back["not_restored"] and "x" in back["restored"], back


LOADS_BADLY = (
    "def refuse():\n"
    "    raise RuntimeError('this value cannot be rebuilt')\n"
    "class Fragile:\n"
    "    def __reduce__(self):\n"
    "        return (refuse, ())\n"
    "fragile = Fragile()\n"
    "y = 7\n"
)


async def test_a_value_that_fails_only_when_loaded_is_named_everywhere(own_server):
    async with connect(own_server, "auto") as c:
        sid = (await run_ok(c, LOADS_BADLY))["session_id"]
        cp = await _tool(c, "checkpoint_session", session_id=sid)
        assert "cannot be rebuilt" in cp["not_saved"].get("fragile", ""), cp
        forked = await _tool(c, "fork_session", session_id=sid)
        branch = forked["sessions"][0]
        assert "cannot be rebuilt" in branch["not_restored"].get("fragile", ""), forked
        assert "y" in branch["restored"], forked
        back = await _tool(c, "restore_checkpoint", session_id=sid, checkpoint_id=cp["checkpoint_id"])
        assert "cannot be rebuilt" in back["not_restored"].get("fragile", ""), back


async def test_a_branch_that_never_ran_comes_back_from_a_stop_as_restarted(own_server):
    async with connect(own_server, "auto") as c:
        sid = (await run_ok(c, DEFINE))["session_id"]
        forked = await _tool(c, "fork_session", session_id=sid)
        branch = forked["sessions"][0]["session_id"]
    status = await asyncio.to_thread(stop_group, own_server, signal.SIGTERM)
    assert status == 0, own_server.log()
    assert "saving an interpreter's globals at shutdown failed" not in own_server.log(400), own_server.log(400)
    restart(own_server)
    sc = await check_after_restart(own_server, branch)
    assert sc["state"] != "new", sc
