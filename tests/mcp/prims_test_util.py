"""Helpers shared by the tests/mcp tests: result checks and a loopback HTTP server."""

from __future__ import annotations

import json
import threading
from collections import Counter
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

MODERN_VERSION = "2026-07-28"
TOOL_NAMES = {"run_code", "list_dir", "preview_file", "mount_file", "persist_artifact",
              "fork_session", "checkpoint_session", "restore_checkpoint"}


# ---------------------------------------------------------------- clients


@asynccontextmanager
async def connect(server, mode: str, **kwargs):
    """A real `mcp.Client` on the server, checking the era it negotiated.

    mode="legacy" must use an initialize handshake; mode="auto" must end up on
    2026-07-28 (the client probes `server/discover` and would silently fall back
    to initialize if the server did not serve the new era).
    """
    kwargs.setdefault("read_timeout_seconds", 120)
    with unwrapped_failures():
        async with Client(server.url, mode=mode, **kwargs) as c:
            check_era(c, mode)
            yield c


def _leaf(e: BaseException) -> BaseException:
    while isinstance(e, BaseExceptionGroup) and len(e.exceptions) == 1:
        e = e.exceptions[0]
    return e


class unwrapped_failures:
    """Re-raise a test failure that the client's task groups wrapped in
    (nested) one-member exception groups as itself, for a readable report."""

    def __enter__(self):
        return self

    def __exit__(self, typ, value, tb):
        if isinstance(value, BaseExceptionGroup):
            leaf = _leaf(value)
            if not isinstance(leaf, BaseExceptionGroup):
                leaf.__suppress_context__ = True
                raise leaf
        return False


def check_era(c: Client, mode: str) -> None:
    if mode == "auto":
        assert c.protocol_version == MODERN_VERSION, (
            f'mode="auto" negotiated {c.protocol_version!r}, not {MODERN_VERSION}: '
            "the server did not answer server/discover, so the client fell back to initialize"
        )
    else:
        assert c.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS, c.protocol_version


@dataclass
class LegacyConnection:
    """A legacy client whose HTTP traffic is observed: the Mcp-Session-Id the
    server assigned and the status of every response."""

    client: Client | None = None
    session_header: str | None = None
    statuses: list[tuple[str, int]] = field(default_factory=list)
    # Every server notification the client received, in order.
    notifications: list[Any] = field(default_factory=list)


@asynccontextmanager
async def connect_legacy_observed(server, terminate_on_close: bool = True):
    conn = LegacyConnection()

    async def on_response(response: httpx2.Response) -> None:
        conn.statuses.append((response.request.method, response.status_code))
        sid = response.headers.get("mcp-session-id")
        if sid:
            conn.session_header = sid

    http = httpx2.AsyncClient(
        timeout=httpx2.Timeout(30, read=300), event_hooks={"response": [on_response]}
    )
    with unwrapped_failures():
        async with http:
            transport = streamable_http_client(
                server.url, http_client=http, terminate_on_close=terminate_on_close
            )
            async def on_message(message) -> None:
                if not isinstance(message, Exception):
                    conn.notifications.append(message)

            async with Client(
                transport, mode="legacy", read_timeout_seconds=120, message_handler=on_message
            ) as c:
                check_era(c, "legacy")
                assert conn.session_header, "initialize answered without an Mcp-Session-Id header"
                conn.client = c
                yield conn


# ---------------------------------------------------------------- results


def text_of(result) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content if getattr(c, "type", "") == "text")


def describe(result) -> str:
    return (
        f"isError={result.is_error} structuredContent={json.dumps(result.structured_content)[:2000]} "
        f"text={text_of(result)[:2000]!r}"
    )


def structured(result) -> dict[str, Any]:
    """structuredContent, checked to be an object mirrored as JSON text."""
    sc = result.structured_content
    assert isinstance(sc, dict), f"no structuredContent object: {describe(result)}"
    mirrors = []
    for c in result.content:
        if getattr(c, "type", "") == "text":
            try:
                mirrors.append(json.loads(c.text))
            except ValueError:
                pass
    unwrapped = list(sc.values())[0] if len(sc) == 1 else object()
    assert any(m == sc or m == unwrapped for m in mirrors), (
        f"no text content mirrors structuredContent as JSON: {describe(result)}"
    )
    return sc


def ok(result) -> dict[str, Any]:
    """A successful tool result's structured content."""
    assert not result.is_error, f"the tool failed: {describe(result)}"
    return structured(result)


def err(result) -> str:
    """A failed tool result's message (isError true)."""
    assert result.is_error, f"expected an isError result, got {describe(result)}"
    msg = text_of(result)
    assert msg.strip(), f"isError result with no message: {describe(result)}"
    return msg


def entries_of(listing: dict[str, Any]) -> list[dict[str, Any]]:
    """The entries of a list_dir result (an object wrapping the list)."""
    lists = [v for v in listing.values() if isinstance(v, list)]
    assert len(lists) == 1, f"list_dir result has no single list of entries: {listing}"
    return lists[0]


async def run(c: Client, code: str, **args):
    return await c.call_tool("run_code", {"code": code, **args})


async def run_ok(c: Client, code: str, **args) -> dict[str, Any]:
    r = ok(await run(c, code, **args))
    assert isinstance(r.get("session_id"), str) and r["session_id"], f"no session_id: {r}"
    return r


# ---------------------------------------------------------------- loopback HTTP


@dataclass
class Put:
    path: str
    headers: dict[str, str]
    body: bytes


class LoopbackHTTP:
    """A real HTTP server on a loopback address, in a thread.

    GET /<anything> serves `files[path]` (404 otherwise) and counts requests;
    PUT /upload/ok... stores the body (200), PUT /upload/deny... answers 403.
    A chunked PUT is recorded and refused with 411 (presigned S3 URLs refuse
    chunked bodies too).
    """

    def __init__(self, host: str = "127.0.0.1"):
        self.files: dict[str, bytes] = {}
        self.gets: Counter[str] = Counter()
        self.puts: list[Put] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                with outer.lock:
                    outer.gets[self.path] += 1
                    body = outer.files.get(self.path)
                if body is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/csv")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_PUT(self):
                headers = {k.lower(): v for k, v in self.headers.items()}
                if "chunked" in headers.get("transfer-encoding", "").lower():
                    with outer.lock:
                        outer.puts.append(Put(self.path, headers, b""))
                    self.send_response(411)
                    self.send_header("Content-Length", "0")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    return
                n = int(headers.get("content-length", "0"))
                body = self.rfile.read(n) if n else b""
                with outer.lock:
                    outer.puts.append(Put(self.path, headers, body))
                status = 403 if self.path.startswith("/upload/deny") else 200
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.httpd = ThreadingHTTPServer((host, 0), Handler)
        self.httpd.daemon_threads = True
        self.host = host
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://{self.host}:{self.port}{path}"

    def count(self, path: str) -> int:
        with self.lock:
            return self.gets[path]

    def puts_to(self, path: str) -> list[Put]:
        with self.lock:
            return [p for p in self.puts if p.path == path]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
