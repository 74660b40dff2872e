"""PRIMS through the real Python MCP SDK (`mcp` 2.3.0), in both protocol eras.

Every test marked with the `mode` fixture runs twice: mode="legacy" (the
initialize handshake and an Mcp-Session-Id) and mode="auto", which must
negotiate 2026-07-28 (stateless; state is kept only through the `session_id`
tool argument). Legacy-only behaviour (the Mcp-Session-Id keeping state,
/artifacts by that header, DELETE) is tested at the end.
"""

from __future__ import annotations

import base64
import http.client
import struct
import time
import uuid
import zlib

import anyio
import httpx2
import pytest

from prims_test_util import (
    TOOL_NAMES,
    LoopbackHTTP,
    connect,
    connect_legacy_observed,
    describe,
    entries_of,
    err,
    ok,
    run,
    run_ok,
)

HOST_PASSWD_MARK = "root:x:0:0"
RUN_KEYS = {
    "stdout", "stderr", "artifacts", "session_id", "exit_code", "status", "timed_out",
    "oom_killed", "duration_ms", "cpu_ms", "memory_peak_bytes", "truncated",
}


@pytest.fixture(params=["legacy", "auto"])
def mode(request):
    return request.param


@pytest.fixture(scope="module")
def loopback():
    srv = LoopbackHTTP("127.0.0.1")
    yield srv
    srv.close()


def run_result(result) -> dict:
    """A run's structured content whether or not the server flags it isError
    (a program that failed is not a failed tool call, but either is fine)."""
    if result.is_error:
        sc = result.structured_content
        assert isinstance(sc, dict), f"failed run without structuredContent: {describe(result)}"
        return sc
    return ok(result)


def raw_get(server, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes, dict]:
    """GET with the path sent byte for byte (no client-side normalisation)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.request("GET", path, headers=headers or {})
        r = conn.getresponse()
        return r.status, r.read(), {k.lower(): v for k, v in r.getheaders()}
    finally:
        conn.close()


def artifact_prefix(run: dict, name: str) -> str:
    """What the server puts before a file's name under output/ in an artifact's
    relative_path (the original: nothing; `/artifacts/<relative_path>`)."""
    arts = {a["name"]: a for a in run["artifacts"]}
    assert name in arts, f"artifact {name} not listed: {run['artifacts']}"
    rel = arts[name]["relative_path"]
    assert rel.endswith(name), rel
    return rel[: -len(name)]


def tiny_png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\x00" + b"\xff\x00\x00" * 4 for _ in range(4))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 4, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


PNG_CODE = """
import os, struct, zlib
def chunk(kind, data):
    return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data))
raw = b''.join(b'\\x00' + b'\\xff\\x00\\x00' * 4 for _ in range(4))
png = (b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', 4, 4, 8, 2, 0, 0, 0))
       + chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b''))
os.makedirs('output', exist_ok=True)
open('output/plot.png', 'wb').write(png)
print(len(png))
"""


# ------------------------------------------------------------------ both eras


async def test_list_tools_have_output_schemas(server, mode):
    async with connect(server, mode) as c:
        tools = (await c.list_tools()).tools
        assert {t.name for t in tools} == TOOL_NAMES, [t.name for t in tools]
        assert len(tools) == 8
        for t in tools:
            assert t.output_schema, f"{t.name} has no outputSchema"
            assert t.output_schema.get("type") == "object", (t.name, t.output_schema)
            assert t.description, f"{t.name} has no description"
        props = {t.name: set(t.input_schema.get("properties", {})) for t in tools}
        required = {t.name: set(t.input_schema.get("required", [])) for t in tools}
        assert {"code", "requirements", "files", "timeout_s", "session_id"} <= props["run_code"], props
        assert required["run_code"] == {"code"}, required
        assert {"dir_path", "session_id"} <= props["list_dir"], props
        assert required["list_dir"] == set(), required
        assert {"relative_path", "session_id"} <= props["preview_file"], props
        assert {"url", "mount_path", "session_id"} <= props["mount_file"], props
        assert {"relative_path", "presigned_url", "session_id"} <= props["persist_artifact"], props
        assert {"session_id", "count"} <= props["fork_session"], props
        assert required["fork_session"] == {"session_id"}, required
        assert required["restore_checkpoint"] == {"session_id", "checkpoint_id"}, required


async def test_run_code_print(server, mode):
    async with connect(server, mode) as c:
        r = await run_ok(c, "print(1)")
        assert r["stdout"] == "1\n", r
        assert r["stderr"] == "", r
        assert r["exit_code"] == 0, r
        assert RUN_KEYS <= set(r), f"missing keys: {RUN_KEYS - set(r)}"
        assert r["status"] == "ok", r
        assert r["timed_out"] is False and r["oom_killed"] is False, r
        assert r["truncated"] == {"stdout": False, "stderr": False}, r
        assert isinstance(r["duration_ms"], int) and r["duration_ms"] >= 0, r
        assert isinstance(r["cpu_ms"], int) and isinstance(r["memory_peak_bytes"], int), r
        assert r["artifacts"] == [], r
        assert not r.get("feedback"), f"feedback given although stdout is not empty: {r}"


async def test_feedback_when_stdout_empty(server, mode):
    async with connect(server, mode) as c:
        r = await run_ok(c, "x = 1 + 1")
        assert r["stdout"] == "" and r["exit_code"] == 0, r
        assert isinstance(r.get("feedback"), str) and "print(" in r["feedback"], r
        assert "mounts/" in r["feedback"], r


async def test_state_kept_with_session_id_argument(server, mode):
    async with connect(server, mode) as c:
        r1 = await run_ok(
            c, "import os\nos.makedirs('output', exist_ok=True)\nopen('output/a.txt', 'w').write('hello')"
        )
        sid = r1["session_id"]
        arts = {a["name"]: a for a in r1["artifacts"]}
        assert "a.txt" in arts, r1
        a = arts["a.txt"]
        assert a["size"] == 5 and a["mime"].startswith("text/plain"), a
        assert a["relative_path"].endswith("a.txt"), a

        r2 = await run_ok(c, "print(open('output/a.txt').read())", session_id=sid)
        assert r2["stdout"] == "hello\n" and r2["session_id"] == sid, r2

        listing = ok(await c.call_tool("list_dir", {"dir_path": "output", "session_id": sid}))
        entries = {e["name"]: e for e in entries_of(listing)}
        assert "a.txt" in entries, listing
        assert entries["a.txt"]["type"] == "file" and entries["a.txt"]["size"] == 5, entries
        assert entries["a.txt"]["path"] == "output/a.txt", entries

        root = ok(await c.call_tool("list_dir", {"session_id": sid}))
        top = {e["name"]: e for e in entries_of(root)}
        assert top.get("output", {}).get("type") == "directory", root

        pv = ok(await c.call_tool("preview_file", {"relative_path": "output/a.txt", "session_id": sid}))
        assert pv["content"] == "hello", pv
        assert pv["size"] == 5 and pv["name"] == "a.txt" and pv["path"] == "output/a.txt", pv
        assert pv["truncated"] is False and pv["mime"].startswith("text/plain"), pv

        # A second connection reaches the same workspace through the argument
        # (while the first is open: closing a legacy client DELETEs its session,
        # which ends the workspace bound to it).
        async with connect(server, mode) as c2:
            r3 = await run_ok(c2, "print(open('output/a.txt').read())", session_id=sid)
            assert r3["stdout"] == "hello\n" and r3["session_id"] == sid, r3


async def test_two_sessions_are_isolated(server, mode):
    async with connect(server, mode) as ca, connect(server, mode) as cb:
        ra = await run_ok(
            ca,
            "import os\nos.makedirs('output', exist_ok=True)\n"
            "open('output/secret-a.txt', 'w').write('A-secret')\nprint('a')",
        )
        rb = await run_ok(cb, "print('b')")
        sa, sb = ra["session_id"], rb["session_id"]
        assert sa != sb

        probe = (
            "import os\n"
            "print(os.path.exists('output/secret-a.txt'))\n"
            "found = []\n"
            "for top, dirs, files in os.walk('/'):\n"
            "    dirs[:] = [d for d in dirs if os.path.join(top, d) not in "
            "('/usr', '/lib', '/lib64', '/bin', '/proc', '/sys', '/dev')]\n"
            "    found += [os.path.join(top, f) for f in files if f == 'secret-a.txt']\n"
            "print(found)\n"
        )
        rb2 = await run_ok(cb, probe, session_id=sb)
        assert rb2["stdout"] == "False\n[]\n", rb2

        listing = ok(await cb.call_tool("list_dir", {"dir_path": "output", "session_id": sb}))
        assert "secret-a.txt" not in {e["name"] for e in entries_of(listing)}, listing
        r = await cb.call_tool("preview_file", {"relative_path": "output/secret-a.txt", "session_id": sb})
        assert "A-secret" not in err(r)

        prefix = artifact_prefix(ra, "secret-a.txt")
        status, body, _ = raw_get(server, f"/artifacts/{prefix}secret-a.txt", {"prims-session-id": sb})
        assert status == 404 and b"A-secret" not in body, (status, body)
        status, body, _ = raw_get(server, f"/artifacts/{prefix}secret-a.txt", {"prims-session-id": sa})
        assert status == 200 and body == b"A-secret", (status, body)


async def test_stdout_streams_as_progress_before_the_result(server, mode):
    code = "import time\nprint('first-chunk', flush=True)\ntime.sleep(0.5)\nprint('second-chunk', flush=True)\n"
    events: list[tuple[float, float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        events.append((time.monotonic(), progress, message))

    async with connect(server, mode) as c:
        result = await c.call_tool("run_code", {"code": code}, progress_callback=on_progress)
        done = time.monotonic()
        r = ok(result)
        assert r["stdout"] == "first-chunk\nsecond-chunk\n", r
        first = [t for t, _, m in events if m and "first-chunk" in m]
        assert first, f"no progress notification carried the stdout chunk; notifications: {events}"
        assert done - first[0] >= 0.3, (
            f"the first chunk arrived only {done - first[0]:.3f} s before the result "
            "(the run sleeps 0.5 s after printing it): it was not streamed"
        )
        progress = [p for _, p, _ in events]
        assert progress == sorted(progress), f"progress must increase: {progress}"


async def test_error_exit_code_and_traceback(server, mode):
    async with connect(server, mode) as c:
        r = run_result(await run(c, "1/0"))
        assert r["exit_code"] == 1, r
        assert "Traceback (most recent call last)" in r["stderr"], r
        assert "ZeroDivisionError" in r["stderr"], r
        assert r["stdout"] == "" and r["timed_out"] is False, r


async def test_code_size_limit(server, mode):
    async with connect(server, mode) as c:
        at_limit = "print(1)#" + "x" * (20_000 - 9)
        assert len(at_limit) == 20_000
        r = await run_ok(c, at_limit)
        assert r["stdout"] == "1\n", r
        too_big = "print(1)#" + "x" * (20_001 - 9)
        msg = err(await run(c, too_big))
        assert "Code block too large (20k char limit)" in msg, msg


async def test_timeout_keeps_partial_output(server, mode):
    async with connect(server, mode) as c:
        code = "import time\nprint('before', flush=True)\ntime.sleep(20)\nprint('after')"
        t0 = time.monotonic()
        r = run_result(await run(c, code, timeout_s=1))
        assert time.monotonic() - t0 < 10, "timeout_s=1 did not stop a 20 s run early"
        assert r["timed_out"] is True and r["status"] == "timeout", r
        assert r["stdout"] == "before\n", r


async def test_cancel_kills_the_run(server, mode):
    code = (
        "import time\n"
        "for i in range(200):\n"
        "    with open('output/ticks', 'a') as f: f.write('x')\n"
        "    print('tick', i, flush=True)\n"
        "    time.sleep(0.1)\n"
    )
    async with connect(server, mode) as c:
        sid = (await run_ok(c, "import os\nos.makedirs('output', exist_ok=True)\nprint('ready')"))["session_id"]
        started = anyio.Event()

        async def on_progress(progress, total, message):
            if message and "tick" in message:
                started.set()

        async def call():
            await c.call_tool("run_code", {"code": code, "session_id": sid}, progress_callback=on_progress)

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            with anyio.fail_after(30):
                await started.wait()
            await anyio.sleep(0.3)
            tg.cancel_scope.cancel()

        await anyio.sleep(1.5)
        size = "import os\nprint(os.path.getsize('output/ticks'))"
        n1 = int((await run_ok(c, size, session_id=sid))["stdout"])
        await anyio.sleep(1.0)
        n2 = int((await run_ok(c, size, session_id=sid))["stdout"])
        assert n1 == n2, f"the cancelled run kept writing: {n1} then {n2} ticks"
        assert n1 < 100, f"the cancelled run was not killed within a second ({n1} of 200 ticks written)"


async def test_path_traversal_is_refused(server, mode):
    async with connect(server, mode) as c:
        r = await run_ok(
            c,
            "import os\nos.makedirs('output', exist_ok=True)\n"
            "os.symlink('/etc/passwd', 'output/pw')\nos.symlink('/', 'output/rootlink')\nprint('ok')",
        )
        sid = r["session_id"]
        for path in ["../../etc/passwd", "/etc/shadow", "/etc/passwd", "output/../../../etc/passwd",
                     "output/pw"]:
            msg = err(await c.call_tool("preview_file", {"relative_path": path, "session_id": sid}))
            assert HOST_PASSWD_MARK not in msg, (path, msg)
        for path in ["../../etc", "/etc", "..", "output/../.."]:
            msg = err(await c.call_tool("list_dir", {"dir_path": path, "session_id": sid}))
            assert HOST_PASSWD_MARK not in msg, (path, msg)
        # A symlink to / must not list the host's root (an error, or the
        # workspace itself when links are resolved inside it).
        result = await c.call_tool("list_dir", {"dir_path": "output/rootlink", "session_id": sid})
        if not result.is_error:
            names = {e["name"] for e in entries_of(ok(result))}
            assert not names & {"etc", "proc", "usr", "root", "var", "sys"}, names


async def test_artifacts_http_serves_relative_path(server, mode):
    """`GET /artifacts/<relative_path>` with an artifact's relative_path as
    run_code listed it (the documented way to download it)."""
    async with connect(server, mode) as c:
        r = await run_ok(
            c, "import os\nos.makedirs('output/sub', exist_ok=True)\nopen('output/sub/real.txt', 'w').write('real')"
        )
        sid = r["session_id"]
        rel = {a["name"]: a for a in r["artifacts"]}["real.txt"]["relative_path"]
        status, body, headers = raw_get(server, f"/artifacts/{rel}", {"prims-session-id": sid})
        assert status == 200 and body == b"real", (
            f"GET /artifacts/{rel} (relative_path from run_code) answered {status} {body!r}")
        assert headers.get("content-type", "").startswith("text/plain"), headers
        status, body, headers = raw_get(server, f"/artifacts/{rel}",
                                        {"prims-session-id": sid, "range": "bytes=1-2"})
        assert status == 206 and body == b"ea", (status, body, headers)


async def test_artifacts_http_attacks(server, mode):
    async with connect(server, mode) as c:
        r = await run_ok(
            c,
            "import os\nos.makedirs('output', exist_ok=True)\nopen('output/real.txt', 'w').write('real')\n"
            "os.symlink('/etc/passwd', 'output/pw')\nos.symlink('/etc', 'output/etcdir')\nprint('ok')",
        )
        sid = r["session_id"]
        rel = {a["name"]: a for a in r["artifacts"]}["real.txt"]["relative_path"]
        status, _, _ = raw_get(server, f"/artifacts/{rel}")
        assert status == 400, f"no session header: expected 400, got {status}"

        # Whether paths are written with or without output/ in front, nothing
        # outside the session's output/ is served.
        for prefix in ["", "output/"]:
            for path in [f"/artifacts/{prefix}..%2F..%2F..%2F..%2Fetc%2Fpasswd",
                         f"/artifacts/{prefix}%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
                         f"/artifacts/{prefix}../../../../etc/passwd",
                         *(["/artifacts/%2Fetc%2Fpasswd"] if not prefix else [])]:
                status, body, _ = raw_get(server, path, {"prims-session-id": sid})
                assert status in (400, 403), f"{path}: expected 400 or 403, got {status}"
                assert HOST_PASSWD_MARK.encode() not in body, path
            for path in [f"/artifacts/{prefix}pw", f"/artifacts/{prefix}etcdir/passwd"]:
                status, body, _ = raw_get(server, path, {"prims-session-id": sid})
                assert status in (403, 404), f"{path} (a symlink out of the workspace): got {status}"
                assert HOST_PASSWD_MARK.encode() not in body, path
            status, _, _ = raw_get(server, f"/artifacts/{prefix}missing.txt", {"prims-session-id": sid})
            assert status == 404, status
        status, _, _ = raw_get(server, f"/artifacts/{rel}",
                               {"prims-session-id": "no-such-session-" + uuid.uuid4().hex})
        assert status in (400, 404), status


async def test_png_comes_back_as_image_content(server, mode):
    async with connect(server, mode) as c:
        result = await run(c, PNG_CODE)
        r = ok(result)
        assert r["stdout"] == f"{len(tiny_png())}\n", r
        images = [b for b in result.content if getattr(b, "type", "") == "image"]
        assert images, f"no image content for output/plot.png: {[b.type for b in result.content]}"
        assert images[0].mime_type == "image/png"
        assert base64.b64decode(images[0].data) == tiny_png()
        assert any(a["name"] == "plot.png" and a["mime"] == "image/png" for a in r["artifacts"]), r


async def test_prompt_python_programmer(server, mode):
    async with connect(server, mode) as c:
        prompts = {p.name: p for p in (await c.list_prompts()).prompts}
        assert "python_programmer" in prompts, list(prompts)
        args = {a.name: a for a in prompts["python_programmer"].arguments or []}
        assert args.get("task") and args["task"].required, args
        assert "mounted_files" in args and not args["mounted_files"].required, args
        task = "Sum the integers from 1 to 10 " + uuid.uuid4().hex[:8]
        got = await c.get_prompt("python_programmer", {"task": task, "mounted_files": "data.csv"})
        text = "\n".join(getattr(m.content, "text", "") for m in got.messages)
        assert task in text, text
        assert "data.csv" in text and "mounts/" in text and "output/" in text and "print" in text, text
        got = await c.get_prompt("python_programmer", {"task": task})
        assert got.messages, got


async def test_mount_file_downloads_once(server, mode, loopback):
    tag = uuid.uuid4().hex[:8]
    data = f"a,b\n1,{tag}\n".encode()
    loopback.files[f"/data-{tag}.csv"] = data
    loopback.files[f"/files-{tag}.csv"] = data + b"3,4\n"
    url = loopback.url(f"/data-{tag}.csv")
    async with connect(server, mode) as c:
        sid = (await run_ok(c, "print('start')"))["session_id"]
        m1 = ok(await c.call_tool("mount_file", {"url": url, "mount_path": "data/x.csv", "session_id": sid}))
        assert m1["mounted_as"] == "mounts/data/x.csv" and m1["bytes"] == len(data), m1
        assert loopback.count(f"/data-{tag}.csv") == 1

        r = await run_ok(c, "print(open('mounts/data/x.csv').read(), end='')", session_id=sid)
        assert r["stdout"] == data.decode(), r

        m2 = ok(await c.call_tool("mount_file", {"url": url, "mount_path": "data/x.csv", "session_id": sid}))
        assert (m2["mounted_as"], m2["bytes"]) == (m1["mounted_as"], m1["bytes"]), m2
        assert loopback.count(f"/data-{tag}.csv") == 1, "mounting the same URL again downloaded it again"

        r = await run_ok(
            c,
            "try:\n    open('mounts/data/x.csv', 'w').write('overwritten')\n    print('writable')\n"
            "except OSError as e:\n    print('read-only', type(e).__name__)",
            session_id=sid,
        )
        assert r["stdout"].startswith("read-only"), f"mounts/ is writable in the jail: {r}"

        files = [{"url": loopback.url(f"/files-{tag}.csv"), "mountPath": "f.csv"}]
        code = "print(open('mounts/f.csv').read(), end='')"
        r = await run_ok(c, code, files=files, session_id=sid)
        assert r["stdout"] == (data + b"3,4\n").decode(), r
        r = await run_ok(c, code, files=files, session_id=sid)
        assert r["stdout"] == (data + b"3,4\n").decode(), r
        assert loopback.count(f"/files-{tag}.csv") == 1, "files[] downloaded the same URL twice"


async def test_mount_file_refuses_bad_targets(server, mode, loopback):
    # 127.0.0.2 is loopback but outside the test policy's egress allow-list.
    other = LoopbackHTTP("127.0.0.2")
    try:
        other.files["/x.csv"] = b"should not be fetched"
        async with connect(server, mode) as c:
            sid = (await run_ok(c, "print('start')"))["session_id"]
            msg = err(await c.call_tool(
                "mount_file", {"url": other.url("/x.csv"), "mount_path": "x.csv", "session_id": sid}))
            assert other.count("/x.csv") == 0, f"the SSRF guard let a request through to 127.0.0.2: {msg}"
            err(await c.call_tool(
                "mount_file", {"url": "file:///etc/passwd", "mount_path": "p.txt", "session_id": sid}))
            tag = uuid.uuid4().hex[:8]
            loopback.files[f"/t-{tag}"] = b"x"
            for bad in ["../../escape.txt", "/etc/escape.txt", "../mounts2/x"]:
                err(await c.call_tool(
                    "mount_file", {"url": loopback.url(f"/t-{tag}"), "mount_path": bad, "session_id": sid}))
    finally:
        other.close()


async def test_persist_artifact_puts_with_content_length(server, mode, loopback):
    tag = uuid.uuid4().hex[:8]
    payload = bytes(range(256)) * 400
    async with connect(server, mode) as c:
        r = await run_ok(
            c,
            "import os\nos.makedirs('output', exist_ok=True)\n"
            "open('output/up.bin', 'wb').write(bytes(range(256)) * 400)\nprint('ok')",
        )
        sid = r["session_id"]
        res = ok(await c.call_tool("persist_artifact", {
            "relative_path": "up.bin", "presigned_url": loopback.url(f"/upload/ok-{tag}?X-Sig=abc"),
            "session_id": sid}))
        assert res["uploaded_bytes"] == len(payload) and res["status"] == 200, res
        puts = loopback.puts_to(f"/upload/ok-{tag}?X-Sig=abc")
        assert len(puts) == 1, puts
        assert "transfer-encoding" not in puts[0].headers, puts[0].headers
        assert puts[0].headers.get("content-length") == str(len(payload)), puts[0].headers
        assert puts[0].body == payload

        msg = err(await c.call_tool("persist_artifact", {
            "relative_path": "up.bin", "presigned_url": loopback.url(f"/upload/deny-{tag}"),
            "session_id": sid}))
        assert "Upload failed with HTTP 403" in msg, msg

        for bad in ["../../../etc/passwd", "/etc/passwd", "missing.bin"]:
            err(await c.call_tool("persist_artifact", {
                "relative_path": bad, "presigned_url": loopback.url(f"/upload/ok-bad-{tag}"),
                "session_id": sid}))
        assert loopback.puts_to(f"/upload/ok-bad-{tag}") == []


async def test_listed_relative_path_works_with_persist_artifact(server, mode, loopback):
    """A model passes an artifact's relative_path, as run_code listed it, to
    persist_artifact: that must name the same file."""
    tag = uuid.uuid4().hex[:8]
    async with connect(server, mode) as c:
        r = await run_ok(
            c, "import os\nos.makedirs('output', exist_ok=True)\nopen('output/listed.txt', 'w').write('listed')"
        )
        rel = {a["name"]: a for a in r["artifacts"]}["listed.txt"]["relative_path"]
        res = await c.call_tool("persist_artifact", {
            "relative_path": rel, "presigned_url": loopback.url(f"/upload/ok-listed-{tag}"),
            "session_id": r["session_id"]})
        assert not res.is_error, f"persist_artifact({rel!r}) with run_code's relative_path: {describe(res)}"
        assert [p.body for p in loopback.puts_to(f"/upload/ok-listed-{tag}")] == [b"listed"]


# ------------------------------------------------------------------ legacy only


async def test_legacy_session_header_keeps_state(server):
    async with connect_legacy_observed(server) as conn:
        c = conn.client
        r1 = await run_ok(c, "import os\nos.makedirs('output', exist_ok=True)\nopen('output/a.txt', 'w').write('hello')")
        r2 = await run_ok(c, "print(open('output/a.txt').read())")
        assert r2["stdout"] == "hello\n", r2
        assert r2["session_id"] == r1["session_id"], (r1, r2)
        listing = ok(await c.call_tool("list_dir", {"dir_path": "output"}))
        assert "a.txt" in {e["name"] for e in entries_of(listing)}, listing
        pv = ok(await c.call_tool("preview_file", {"relative_path": "output/a.txt"}))
        assert pv["content"] == "hello", pv


async def test_legacy_artifacts_by_mcp_session_id(server):
    async with connect_legacy_observed(server) as conn:
        r = await run_ok(conn.client, "import os\nos.makedirs('output', exist_ok=True)\nopen('output/a.txt', 'w').write('hello')")
        prefix = artifact_prefix(r, "a.txt")
        status, body, headers = raw_get(server, f"/artifacts/{prefix}a.txt", {"mcp-session-id": conn.session_header})
        assert status == 200 and body == b"hello", (status, body)
        assert headers.get("content-type", "").startswith("text/plain"), headers
        status, body, _ = raw_get(server, f"/artifacts/{prefix}a.txt", {"prims-session-id": r["session_id"]})
        assert status == 200 and body == b"hello", (status, body)


async def test_legacy_delete_ends_the_workspace(server):
    async with connect_legacy_observed(server, terminate_on_close=False) as conn:
        c = conn.client
        r = await run_ok(c, "import os\nos.makedirs('output', exist_ok=True)\nopen('output/a.txt', 'w').write('hello')")
        sid, prefix = r["session_id"], artifact_prefix(r, "a.txt")
        header = conn.session_header
        before = raw_get(server, f"/artifacts/{prefix}a.txt", {"mcp-session-id": header})[:2]

        async with httpx2.AsyncClient(timeout=30) as http:
            d = await http.delete(server.url, headers={
                "mcp-session-id": header, "mcp-protocol-version": c.protocol_version})
        # 202 would make the Python SDK log "Session termination failed".
        assert d.status_code == 204, f"DELETE /mcp answered {d.status_code}: {d.text}"

    # The workspace is gone for every way of naming it.
    async with connect(server, "auto") as probe:
        deadline = time.monotonic() + 5
        while True:
            result = await run(probe, "print(open('output/a.txt').read())", session_id=sid)
            if result.is_error or time.monotonic() > deadline:
                break
            await anyio.sleep(0.1)
        assert result.is_error, f"the deleted session's workspace still runs code: {describe(result)}"
    status, _, _ = raw_get(server, f"/artifacts/{prefix}a.txt", {"mcp-session-id": header})
    assert status == 404, f"/artifacts by the deleted Mcp-Session-Id answered {status}, not 404"
    status, _, _ = raw_get(server, f"/artifacts/{prefix}a.txt", {"prims-session-id": sid})
    assert status == 404, f"/artifacts by the deleted workspace's session_id answered {status}, not 404"
    assert before == (200, b"hello"), f"before the DELETE, GET /artifacts/{prefix}a.txt answered {before}"


# ------------------------------------------------------------------ HTTP surface


async def test_bad_origin_gets_403(server):
    init = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "origin-test", "version": "0"}},
    }
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    async with httpx2.AsyncClient(timeout=30) as http:
        bad = await http.post(server.url, json=init, headers={**headers, "origin": "http://evil.example"})
        assert bad.status_code == 403, f"Origin http://evil.example got {bad.status_code}: {bad.text[:300]}"
        good = await http.post(server.url, json=init, headers=headers)
        assert good.status_code == 200, f"no Origin got {good.status_code}: {good.text[:300]}"
        sid = good.headers.get("mcp-session-id")
        if sid:
            await http.delete(server.url, headers={"mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"})


async def test_health_and_metrics(server):
    async with connect(server, "legacy") as c:
        await run_ok(c, "print(1)")
    async with httpx2.AsyncClient(timeout=30) as http:
        h = await http.get(f"{server.base}/health")
        assert h.status_code == 200 and h.text.strip(), (h.status_code, h.text)
        m = await http.get(f"{server.base}/metrics")
        assert m.status_code == 200, m.status_code
        assert m.headers.get("content-type", "").startswith("text/plain"), m.headers
        text = m.text
        types = {line.split()[2]: line.split()[3] for line in text.splitlines()
                 if line.startswith("# TYPE ") and len(line.split()) >= 4}
        assert types, f"no Prometheus # TYPE lines:\n{text[:2000]}"
        assert "histogram" in types.values(), f"no histogram (run duration) in /metrics: {types}"
        samples = [line for line in text.splitlines() if line and not line.startswith("#")]
        for line in samples:
            float(line.rsplit(" ", 1)[-1])  # every sample ends in a number
