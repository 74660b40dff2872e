"""Checkpoints are charged what they cost, through MCP, against a real
`prims serve` with the default `[branches]` budgets.

- A workspace that is a farm of symlinks with 4,000-byte targets (the review's case) takes a
  block and an inode per link: its checkpoint is charged that, not the
  few bytes of its regular files.
- Without bearer tokens every client is one tenant; one client's sessions
  that keep all the checkpoints their lineages may (16 each, four of them:
  the tenant's 64) leave another client's session room for its own.
"""

from __future__ import annotations

import pytest

from conftest import running_server
from prims_test_util import connect, describe, run_ok

LINKS = 12_000
FARM = (
    "import os\n"
    "os.makedirs('farm', exist_ok=True)\n"
    # A target that fills a block of the workspace's filesystem (the
    # review's 4,000 bytes on 4 KiB blocks; a small image has 1 KiB ones),
    # in names of at most 200 bytes.
    "block = os.statvfs('.').f_frsize\n"
    "target = '/'.join(['x' * 199] * ((block - 100) // 200))\n"
    f"for i in range({LINKS}):\n"
    "    os.symlink(target, f'farm/l{i}')\n"
    "print(len(os.listdir('farm')), block)\n"
)


@pytest.fixture
def own_server():
    """A server of the test's own, which it may stop and start again."""
    with running_server() as s:
        yield s


async def checkpoint(c, sid: str):
    return await c.call_tool("checkpoint_session", {"session_id": sid})


async def test_a_symlink_farm_is_charged_its_blocks(own_server):
    async with connect(own_server, "auto") as c:
        sc = await run_ok(c, FARM)
        links, block = map(int, sc["stdout"].split())
        assert links == LINKS, sc
        r = await checkpoint(c, sc["session_id"])
        assert not r.is_error, describe(r)
        charged = r.structured_content["bytes"]
        # A block per link at least: the links hold no byte of file data.
        assert charged >= LINKS * block, (block, r.structured_content)


async def test_one_clients_full_checkpoints_leave_another_client_room(own_server):
    async with connect(own_server, "auto") as c:
        mine = [(await run_ok(c, f"v = {i}"))["session_id"] for i in range(4)]
        for sid in mine:
            for n in range(16):
                r = await checkpoint(c, sid)
                assert not r.is_error, (sid, n, describe(r))
            # The session's own budget is full.
            r = await checkpoint(c, sid)
            assert r.is_error and "checkpoint" in describe(r), describe(r)
    # Another client (no token either: the same tenant), its own session.
    async with connect(own_server, "auto") as other:
        sid = (await run_ok(other, "w = 1"))["session_id"]
        r = await checkpoint(other, sid)
        assert not r.is_error, describe(r)
