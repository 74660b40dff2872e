"""A session's files as MCP resources, through the real Python SDK: list,
read (text and blob), subscribe (legacy resources/subscribe, 2026-07-28
subscriptions/listen), the path and session rules, resource links in
run_code results; also the quiet close of a legacy session and the
`Mcp-Param-Session-Id` header that `x-mcp-header` asks clients to send."""

from __future__ import annotations

import base64
import functools
import logging
import uuid

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from prims_test_util import connect, connect_legacy_observed, run_ok

PREFIX = "prims://sessions/"
BINARY = bytes(range(256)) * 4

WRITE_FILES = f"""
import os
os.makedirs('output/sub dir', exist_ok=True)
open('output/table.csv', 'w').write('a,b\\n1,2\\n')
open('output/blob.png', 'wb').write({BINARY!r})
open('output/sub dir/notes ü.txt', 'w').write('hello')
open('scratch.txt', 'w').write('top level')
"""


def uri(session: str, path: str) -> str:
    from urllib.parse import quote
    return PREFIX + session + "/" + quote(path, safe="/-._~")


def updated_uris(messages) -> list[str]:
    out = []
    for m in messages:
        root = getattr(m, "root", m)
        if getattr(root, "method", None) == "notifications/resources/updated":
            out.append(root.params.uri)
    return out


async def all_resources(c) -> list:
    found, cursor = [], None
    while True:
        page = await c.list_resources(cursor=cursor, cache_mode="bypass")
        found += page.resources
        cursor = page.next_cursor
        if not cursor:
            return found


# resources/subscribe is what legacy-era clients have; the SDK warns about its era.
@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
async def test_legacy_client_lists_reads_and_subscribes(server):
    async with connect_legacy_observed(server) as conn:
        c = conn.client
        r = await run_ok(c, WRITE_FILES)
        sid = r["session_id"]

        listed = {str(x.uri): x for x in await all_resources(c)}
        want = {uri(sid, p) for p in ["output/table.csv", "output/blob.png", "output/sub dir/notes ü.txt", "scratch.txt"]}
        assert want <= set(listed), f"missing: {want - set(listed)}; listed: {sorted(listed)}"
        csv = listed[uri(sid, "output/table.csv")]
        assert csv.mime_type == "text/csv" and csv.size == 8, csv

        text = await c.read_resource(uri(sid, "output/table.csv"))
        (content,) = text.contents
        assert content.text == "a,b\n1,2\n" and content.mime_type == "text/csv", content
        blob = await c.read_resource(uri(sid, "output/blob.png"))
        (content,) = blob.contents
        assert content.mime_type == "image/png", content
        assert base64.b64decode(content.blob) == BINARY
        odd = await c.read_resource(uri(sid, "output/sub dir/notes ü.txt"))
        assert odd.contents[0].text == "hello"

        templates = await c.list_resource_templates()
        # The session's notebook and checkpoints, then any workspace file.
        assert [t.uri_template for t in templates.resource_templates] == [
            PREFIX + "{session_id}/notebook.ipynb",
            PREFIX + "{session_id}/checkpoints",
            PREFIX + "{session_id}/{+path}",
        ]

        # Subscribe, change the file in a run, get notified; unsubscribe, nothing more.
        target = uri(sid, "output/table.csv")
        await c.subscribe_resource(target)
        await c.subscribe_resource(uri(sid, "output/untouched.txt"))
        await run_ok(c, "open('output/table.csv', 'w').write('a,b\\n3,4\\n')")
        await wait_for(lambda: updated_uris(conn.notifications) == [target], conn)
        await c.unsubscribe_resource(target)
        await run_ok(c, "open('output/table.csv', 'w').write('changed again')")
        await anyio.sleep(0.5)
        assert updated_uris(conn.notifications) == [target], updated_uris(conn.notifications)


async def wait_for(cond, conn, within: float = 10):
    with anyio.fail_after(within):
        while not cond():
            await anyio.sleep(0.05)


async def test_run_results_link_new_artifacts(server):
    async with connect(server, "auto") as c:
        result = await c.call_tool("run_code", {"code": WRITE_FILES})
        sid = result.structured_content["session_id"]
        links = sorted(str(b.uri) for b in result.content if b.type == "resource_link")
        assert links == sorted(uri(sid, p) for p in ["output/blob.png", "output/sub dir/notes ü.txt", "output/table.csv"]), links
        # A stateless client reads a linked file through the template.
        read = await c.read_resource(uri(sid, "output/table.csv"))
        assert read.contents[0].text == "a,b\n1,2\n"
        # It has no current session, so its resources/list holds only the
        # view of a run (an MCP App), which every caller may read.
        listed = (await c.list_resources()).resources
        assert [(str(x.uri), x.mime_type) for x in listed] == [("ui://prims/run-view.html", "text/html;profile=mcp-app")]


async def test_listen_notifies_a_2026_client(server):
    async with connect(server, "auto") as c:
        sid = (await run_ok(c, "open('watched.txt', 'w').write('1')"))["session_id"]
        target = uri(sid, "watched.txt")
        async with c.listen(resource_subscriptions=[target]) as sub:
            await run_ok(c, "open('watched.txt', 'w').write('22')", session_id=sid)
            with anyio.fail_after(10):
                event = await sub.__anext__()
        assert str(event.uri) == target, event


async def test_listen_hears_the_end_of_a_run_under_way_when_it_subscribed(server):
    """The run writes the file before the listen's watch is registered (and
    takes its baseline), and ends after: its end is still reported."""
    async with connect(server, "auto") as c:
        sid = (await run_ok(c, "open('watched.txt', 'w').write('1')"))["session_id"]
        target = uri(sid, "watched.txt")
        slow = "import time\nopen('watched.txt', 'w').write('22')\ntime.sleep(2)"
        async with anyio.create_task_group() as tg:
            tg.start_soon(functools.partial(run_ok, c, slow, session_id=sid))
            await anyio.sleep(0.7)  # written, still running
            async with c.listen(resource_subscriptions=[target]) as sub:
                with anyio.fail_after(10):
                    event = await sub.__anext__()
        assert str(event.uri) == target, event


async def test_pagination_walks_every_file_once(server):
    async with connect_legacy_observed(server) as conn:
        c = conn.client
        await run_ok(c, "import os\nos.makedirs('output/many', exist_ok=True)\n"
                        "[open(f'output/many/{i:03}.txt', 'w').write(str(i)) for i in range(230)]")
        pages, cursor, seen = 0, None, []
        while True:
            page = await c.list_resources(cursor=cursor, cache_mode="bypass")
            pages += 1
            seen += [str(x.uri) for x in page.resources]
            cursor = page.next_cursor
            if not cursor:
                break
        assert pages >= 3, pages
        assert len(seen) == len(set(seen)) and sum("/output/many/" in u for u in seen) == 230
        with pytest.raises(MCPError):
            await c.list_resources(cursor="not a cursor!")


async def test_paths_symlinks_and_other_sessions_are_refused(server):
    async with connect(server, "auto") as c:
        sid = (await run_ok(c, "import os\nos.makedirs('output', exist_ok=True)\n"
                               "os.symlink('/etc/passwd', 'output/passwd')\n"
                               "os.symlink('/workspace/output', 'output/loop')\n"
                               "open('output/ok.txt', 'w').write('ok')"))["session_id"]
        refused = [
            uri(sid, "output/passwd"),          # a symlink out of the workspace
            PREFIX + sid + "/../../etc/passwd",
            PREFIX + sid + "/output/%2e%2e/%2e%2e/etc/passwd",
            PREFIX + sid + "/%2Fetc%2Fpasswd",
            PREFIX + uuid.uuid4().hex + "/output/ok.txt",  # no such session
            "file:///etc/passwd",
            PREFIX + sid + "/output/nothing.txt",
        ]
        for u in refused:
            with pytest.raises(MCPError) as e:
                await c.read_resource(u)
            assert "root:x:0:0" not in str(e.value), u
        assert (await c.read_resource(uri(sid, "output/ok.txt"))).contents[0].text == "ok"
        with pytest.raises(MCPError):
            await c.read_resource(uri(sid, "output/loop/ok.txt"))


async def test_closing_a_legacy_session_is_quiet(server, caplog):
    caplog.set_level(logging.DEBUG)
    async with connect_legacy_observed(server) as conn:
        await run_ok(conn.client, "print(1)")
    assert ("DELETE", 204) in conn.statuses, conn.statuses
    noisy = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert not [m for m in noisy if "termination" in m.lower()], noisy


async def test_session_id_is_routable_by_header(server):
    sent = []

    async def on_request(request: httpx2.Request) -> None:
        if request.headers.get("mcp-method") == "tools/call":
            sent.append(request.headers.get("mcp-param-session-id"))

    async with httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=300),
                                  event_hooks={"request": [on_request]}) as http:
        transport = streamable_http_client(server.url, http_client=http)
        async with Client(transport, mode="auto", read_timeout_seconds=120) as c:
            assert c.protocol_version == "2026-07-28", c.protocol_version
            tools = {t.name: t for t in (await c.list_tools()).tools}
            for name in ["run_code", "list_dir", "preview_file", "mount_file", "persist_artifact",
                         "fork_session", "checkpoint_session", "restore_checkpoint"]:
                prop = tools[name].input_schema["properties"]["session_id"]
                assert prop.get("x-mcp-header") == "Session-Id" and prop.get("type") == "string", (name, prop)
            sid = (await run_ok(c, "x = 1"))["session_id"]
            await run_ok(c, "x", session_id=sid)
    # The SDK mirrored the argument into the header a load balancer routes on.
    assert sent == [None, sid], sent

    async def call(headers: dict[str, str], session: str) -> httpx2.Response:
        body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "list_dir", "arguments": {"session_id": session},
                           "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                     "io.modelcontextprotocol/clientCapabilities": {}}}}
        base = {"content-type": "application/json", "accept": "application/json, text/event-stream",
                "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "list_dir"}
        async with httpx2.AsyncClient(timeout=30) as http:
            return await http.post(server.url, json=body, headers={**base, **headers})

    good = await call({"mcp-param-session-id": sid}, sid)
    assert good.status_code == 200 and sid in good.text, (good.status_code, good.text[:300])
    # Nothing streamed before it, so plain JSON (what rmcp's client reliably
    # learns x-mcp-header annotations from).
    assert good.headers["content-type"].startswith("application/json"), good.headers
    other = uuid.uuid4().hex
    bad = await call({"mcp-param-session-id": other}, sid)
    assert bad.status_code == 400 and "-32020" in bad.text.replace(" ", ""), (bad.status_code, bad.text[:300])
    missing = await call({}, sid)
    assert missing.status_code == 400, (missing.status_code, missing.text[:300])
