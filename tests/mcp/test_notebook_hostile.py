"""A notebook session's extra ways in stay inside the jail.

`!cmd` runs in the jail with the jail's identity, filters and limits; the
IPython layer at /ipython is read-only; and hostile rich reprs (huge, slow,
raising, of the wrong type, in floods, or playing with file descriptors)
cost their own output only: each cell gets a clean result and the next call
in the same session runs in the same interpreter with its state
(`state: kept`).
"""

from __future__ import annotations

from contextlib import asynccontextmanager

from prims_test_util import connect, describe


class Session:
    def __init__(self, client):
        self.c = client
        self.sid = None

    async def run(self, code: str, **args) -> dict:
        if self.sid is not None:
            args["session_id"] = self.sid
        r = await self.c.call_tool("run_code", {"code": code, **args})
        sc = r.structured_content
        assert isinstance(sc, dict), describe(r)
        self.sid = sc["session_id"]
        return sc

    async def still_kept(self, value: int) -> None:
        """The interpreter and its state survived: `marker` is still `value`."""
        sc = await self.run("marker")
        assert sc["status"] == "ok" and sc["state"] == "kept", sc
        assert sc["result"] == str(value), sc


@asynccontextmanager
async def open_session(server):
    # A context manager, not an async fixture: the client's task groups must
    # be left in the task that entered them.
    async with connect(server, "auto") as c:
        s = Session(c)
        sc = await s.run("marker = 1\nimport os, sys, time\nfrom IPython.display import display")
        assert sc["status"] == "ok", sc
        yield s


# ---------------------------------------------------------------- !cmd


async def test_shell_commands_run_as_the_session_user(server):
    async with open_session(server) as session:
        sc = await session.run("!id -u\nprint(os.getuid())")
        assert sc["status"] == "ok", sc
        shell_uid, python_uid = sc["stdout"].split()
        assert shell_uid == python_uid and int(shell_uid) != 0, sc


async def test_shell_commands_have_no_capabilities_and_the_filter(server):
    async with open_session(server) as session:
        sc = await session.run("!cat /proc/self/status")
        fields = dict(
            line.split(":", 1) for line in sc["stdout"].splitlines() if ":" in line
        )
        status = {k: fields[k].strip() for k in ("CapEff", "CapPrm", "Seccomp", "NoNewPrivs")}
        assert status == {
            "CapEff": "0000000000000000",
            "CapPrm": "0000000000000000",
            "Seccomp": "2",
            "NoNewPrivs": "1",
        }, sc["stdout"]


FORK_UNTIL_REFUSED = """\
%%writefile fork_until_refused.py
import errno, os, time
kids, refused = 0, None
while kids < 100000:
    try:
        pid = os.fork()
    except OSError as e:
        refused = errno.errorcode[e.errno]
        break
    if pid == 0:
        time.sleep(5)
        os._exit(0)
    kids += 1
print(kids, refused)
"""


BOMB = """\
%%writefile bomb.py
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
"""


async def test_a_shell_fork_bomb_stays_within_the_pids_limit(server):
    async with open_session(server) as session:
        sc = await session.run(FORK_UNTIL_REFUSED)
        assert sc["status"] == "ok", sc
        # The default limits.pids is 64 for everything in the jail: the agent,
        # its threads, the shell and python all take a place.
        sc = await session.run("!python3 fork_until_refused.py", timeout_s=20)
        assert sc["status"] == "ok", sc
        kids, refused = sc["stdout"].split()
        assert refused == "EAGAIN" and 0 < int(kids) < 64, sc
        await session.still_kept(1)

        # A real bomb: every process forks for ever and survives a refusal.
        # It cannot stop on its own, so the call times out, and every process
        # of the command goes with it.
        sc = await session.run(BOMB)
        assert sc["status"] == "ok", sc
        procs = "print(sum(1 for p in os.listdir('/proc') if p.isdigit()))"
        sc = await session.run("time.sleep(6)\n" + procs)
        idle = int(sc["stdout"])
        sc = await session.run("!python3 bomb.py", timeout_s=5)
        assert sc["status"] == "timeout" and sc["timed_out"], sc
        sc = await session.run(procs + "\n!echo the shell works")
        assert sc["status"] == "ok" and sc["state"] == "kept", sc
        assert sc["stdout"] == f"{idle}\nthe shell works\n", sc
        # Nothing of the bomb runs on, burning the session's CPU.
        assert sc["cpu_ms"] < 1000, sc


async def test_shell_commands_cannot_write_outside_the_workspace(server):
    async with open_session(server) as session:
        sc = await session.run(
            "!touch /etc/prims-probe; echo rc=$?\n"
            "!touch /ipython/prims-probe; echo rc=$?\n"
            "!touch /usr/prims-probe; echo rc=$?\n"
            "!touch prims-probe; echo rc=$?"
        )
        lines = sc["stdout"].splitlines()
        assert lines == ["rc=1", "rc=1", "rc=1", "rc=0"], sc
        for path in ("/etc", "/ipython", "/usr"):
            assert f"cannot touch '{path}/prims-probe'" in sc["stderr"], sc
        assert "Read-only file system" in sc["stderr"] or "Permission denied" in sc["stderr"], sc


async def test_the_kernel_layer_is_read_only(server):
    async with open_session(server) as session:
        probe = (
            "import errno\n"
            "def attempt(f):\n"
            "    try:\n"
            "        f()\n"
            "    except OSError as e:\n"
            "        return errno.errorcode[e.errno]\n"
            "    return 'written'\n"
            "import IPython\n"
            "print(IPython.__file__.startswith('/ipython/'))\n"
            "print(attempt(lambda: open('/ipython/planted.py', 'w')))\n"
            "print(attempt(lambda: open(IPython.__file__, 'a')))\n"
            "print(attempt(lambda: os.mkdir('/ipython/IPython/planted')))\n"
            "print(attempt(lambda: os.rename(IPython.__file__, IPython.__file__ + '.x')))"
        )
        sc = await session.run(probe)
        assert sc["status"] == "ok", sc
        # Refused whichever check answers first: the read-only mount (EROFS)
        # for what would create or rename an entry, Landlock (EACCES) for
        # opening one of the layer's files for writing.
        assert sc["stdout"].split() == ["True", "EROFS", "EACCES", "EROFS", "EROFS"], sc
        # pip, from a cell, cannot install into the layer either.
        sc = await session.run(
            "!python3 -m pip install --no-index --target /kernel --no-deps fork_until_refused.py 2>&1 | tail -n 1; "
            "touch /ipython/x 2>&1"
        )
        assert "Read-only file system" in sc["stdout"], sc


# ---------------------------------------------------------------- hostile reprs


async def test_a_huge_repr_is_cut(server):
    async with open_session(server) as session:
        sc = await session.run(
            "class Huge:\n"
            "    def _repr_html_(self):\n"
            "        return 'x' * 100_000_000\n"
            "Huge()"
        )
        assert sc["status"] == "ok", sc
        [out] = sc["outputs"]
        assert out["type"] == "result" and out.get("cut") is True, out
        assert "text/html" not in out["data"] and out["data"]["text/plain"].startswith("<"), out
        await session.still_kept(1)


async def test_a_slow_repr_times_out_and_keeps_the_state(server):
    async with open_session(server) as session:
        sc = await session.run(
            "marker = 2\n"
            "class Slow:\n"
            "    def _repr_png_(self):\n"
            "        time.sleep(60)\n"
            "Slow()",
            timeout_s=3,
        )
        assert sc["status"] == "timeout" and sc["timed_out"], sc
        await session.still_kept(2)


async def test_raising_reprs_lose_their_own_value(server):
    async with open_session(server) as session:
        sc = await session.run(
            "class Raising:\n"
            "    def _repr_html_(self):\n"
            "        raise ValueError('html')\n"
            "    def _repr_json_(self):\n"
            "        raise KeyError('json')\n"
            "    def _repr_mimebundle_(self, include=None, exclude=None):\n"
            "        raise RuntimeError('bundle')\n"
            "    def __repr__(self):\n"
            "        return 'Raising!'\n"
            "display(Raising())\n"
            "Raising()"
        )
        assert sc["status"] == "ok", sc
        assert [o["type"] for o in sc["outputs"]] == ["display", "result"], sc
        for out in sc["outputs"]:
            assert out["data"] == {"text/plain": "Raising!"}, out
        assert sc["result"] == "Raising!", sc
        await session.still_kept(1)


async def test_reprs_of_the_wrong_type_lose_their_own_value(server):
    async with open_session(server) as session:
        sc = await session.run(
            "recursive = []\n"
            "recursive.append(recursive)\n"
            "class Wrong:\n"
            "    def __init__(self, bundle):\n"
            "        self.bundle = bundle\n"
            "    def _repr_mimebundle_(self, include=None, exclude=None):\n"
            "        return self.bundle\n"
            "cases = [\n"
            "    {'text/plain': 42},\n"
            "    {'text/plain': 'ok', 'text/html': b'<b>bytes</b>'},\n"
            "    {'text/plain': 'ok', 'image/png': b'GIF89a not a png'},\n"
            "    {'text/plain': 'ok', 'image/png': 'not base64 !!'},\n"
            "    {'text/plain': 'ok', 'application/json': {str(i): i for i in range(10**6)}},\n"
            "    {'text/plain': 'ok', 'application/json': {'loop': recursive}},\n"
            "    {'text/plain': 'ok', 'text/markdown': ['not', 'text']},\n"
            "    42,\n"
            "]\n"
            "for case in cases:\n"
            "    display(Wrong(case))\n"
        )
        assert sc["status"] == "ok", sc
        outs = sc.get("outputs", [])
        assert len(outs) == 8 and sc.get("outputs_dropped", 0) == 0, sc
        for out in outs:
            # Only text/plain is left of each (IPython puts the object's
            # repr in place of a text/plain that is no string).
            assert set(out["data"]) == {"text/plain"}, out
        assert [o["data"]["text/plain"] for o in outs[1:7]] == ["ok"] * 6, outs
        # Each bundle with a bad value beside its text/plain lost it, and says so.
        assert [bool(o.get("cut")) for o in outs[1:7]] == [True] * 6, outs
        await session.still_kept(1)


async def test_a_flood_of_displays_is_capped(server):
    async with open_session(server) as session:
        sc = await session.run("for i in range(1000):\n    display(i)")
        assert sc["status"] == "ok", sc
        outs = sc["outputs"]
        assert len(outs) == 32 and sc["outputs_dropped"] == 968, (len(outs), sc.get("outputs_dropped"))
        assert [o["data"]["text/plain"] for o in outs] == [str(i) for i in range(32)]
        await session.still_kept(1)


async def test_reprs_that_play_with_file_descriptors(server):
    async with open_session(server) as session:
        sc = await session.run(
            "class Fds:\n"
            "    def _repr_html_(self):\n"
            "        for fd in range(3, 10):\n"
            "            try:\n"
            "                os.write(fd, b'\\x00\\x00\\x00\\x10{\"op\":\"done\"}')\n"
            "            except OSError:\n"
            "                pass\n"
            "        os.close(0)\n"
            "        os.close(1)\n"
            "        os.close(2)\n"
            "        return '<b>fds</b>'\n"
            "Fds()"
        )
        assert sc["status"] == "ok", sc
        assert sc["outputs"][0]["data"].get("text/html") == "<b>fds</b>", sc
        await session.still_kept(1)
        # The closed standard streams were given back to the next cell.
        sc = await session.run("print('out'); print('err', file=sys.stderr)")
        assert (sc["stdout"], sc["stderr"]) == ("out\n", "err\n"), sc

