"""A PRIMS cluster on this machine (scripts/cluster-local.sh: three
`prims serve --node I` behind HAProxy from packaging/haproxy/render.sh),
driven through the router by the real Python SDK in both protocol eras:
session affinity, least-loaded placement, the error after a node is
SIGKILLed (its persisted artifact still in a real S3 server), a drain that
loses no running call, and a rolling restart that fails no call on a node
that is up."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from mcp.shared.exceptions import MCPError

from conftest import PRIMS, REPO, check_prims_binary, descendants
from prims_test_util import connect, connect_legacy_observed, err, ok, run, run_ok, text_of

SCRIPT = REPO / "scripts" / "cluster-local.sh"
FIXTURES = REPO / "tests" / "fixtures"
S3_KEYS = ("AKIDPRIMSCLUSTERTEST", "prims-cluster-test-secret")
NODES = 3
DRAIN_S = 4


def node_of(session_id: str) -> int:
    return int(session_id[:4], 16)


def post_raw(url: str, body: dict, session: str | None = None) -> tuple[int, dict, str]:
    """One legacy-era POST: status, headers (lowercase names), body."""
    headers = {"Content-Type": "application/json", "Mcp-Protocol-Version": "2025-06-18",
               "Accept": "application/json, text/event-stream"}
    if session:
        headers["Mcp-Session-Id"] = session
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers,
                                 method="POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read().decode()


CALL = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "run_code", "arguments": {"code": "print(1)"}}}


async def sessions_on(c, cluster, code: str, nodes: set[int]) -> dict[int, str]:
    """A new session on each of `nodes`, opened through the router."""
    found: dict[int, str] = {}
    for _ in range(60):
        r = await run_ok(c, code)
        if node_of(r["session_id"]) in nodes:
            found.setdefault(node_of(r["session_id"]), r["session_id"])
        if found.keys() == nodes:
            return found
    raise AssertionError(f"60 new sessions reached only nodes {sorted(found)} of {sorted(nodes)}\n"
                         f"router:\n{cluster.router_view()}")


async def legacy_client_on(held: contextlib.AsyncExitStack, cluster, node: int):
    """A legacy SDK client whose MCP session the router placed on `node`."""
    for _ in range(30):
        conn = await held.enter_async_context(
            connect_legacy_observed(cluster, terminate_on_close=False))
        if node_of(conn.session_header) == node:
            return conn
    raise AssertionError(f"30 legacy clients and none placed on node {node}")


def free_base(count: int) -> int:
    """A port with `count` free ports from it on loopback."""
    for _ in range(50):
        base = 20000 + int.from_bytes(os.urandom(2), "big") % 30000
        try:
            for p in range(base, base + count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
    raise RuntimeError("no run of free ports on loopback")


@dataclass
class Cluster:
    url: str
    dir: Path
    env: dict

    def script(self, *args: str, timeout: float = 180) -> str:
        p = subprocess.run([str(SCRIPT), *args], env=self.env, capture_output=True,
                           text=True, timeout=timeout)
        assert p.returncode == 0, f"cluster-local.sh {' '.join(args)}: exit {p.returncode}\n{p.stderr[-3000:]}"
        return p.stdout

    def pid(self, node: int) -> int:
        return int((self.dir / f"node{node}" / "serve.pid").read_text())

    def kill(self, node: int) -> None:
        """SIGKILL the whole node (serve, supervisor, front-end, jails: each
        has a process group of its own) and wait until its port refuses
        connections: a request racing the kill may die with the node, which
        no failure model can answer."""
        serve = self.pid(node)
        for pid in [serve, *descendants(serve)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        (self.dir / f"node{node}" / "serve.pid").unlink()
        port = int((self.dir / f"node{node}" / "port").read_text())
        deadline = time.monotonic() + 10
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) != 0:
                    return
            assert time.monotonic() < deadline, f"node {node} still accepts on {port} 10 s after SIGKILL"
            time.sleep(0.02)

    def start(self, node: int) -> None:
        self.script("start", str(node))

    def stop(self, node: int) -> None:
        self.script("stop", str(node))

    def log(self, node: int) -> str:
        return (self.dir / f"node{node}" / "serve.log").read_text(errors="replace")[-3000:]

    def router_view(self) -> str:
        """Which nodes the router sees up, from its stats page (for failures)."""
        port = int(self.url.rsplit(":", 1)[1].split("/")[0]) + 1000
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats;csv", timeout=5) as r:
                rows = r.read().decode().splitlines()
        except OSError as e:
            return f"(router stats unavailable: {e})"
        return "\n".join(",".join(row.split(",")[:2] + row.split(",")[17:18])
                         for row in rows if row.startswith("prims,"))


@dataclass
class S3:
    """s3s-fs (checks SigV4 presigned URLs) on loopback, read back with boto3."""
    endpoint: str
    python: str

    def client(self, *args: str) -> dict:
        p = subprocess.run([self.python, str(FIXTURES / "s3_client.py"), self.endpoint,
                            *S3_KEYS, *args], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "AWS_CONFIG_FILE": "/dev/null",
                                "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
                                "AWS_EC2_METADATA_DISABLED": "true"})
        assert p.returncode == 0, f"s3_client.py {' '.join(args)}: {p.stderr[-2000:]}"
        return json.loads(p.stdout)


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    p = subprocess.run([str(FIXTURES / "s3.sh")], capture_output=True, text=True, timeout=1800)
    assert p.returncode == 0, f"tests/fixtures/s3.sh failed:\n{p.stderr[-3000:]}"
    found = dict(line.split("=", 1) for line in p.stdout.splitlines() if "=" in line)
    data = tmp_path_factory.mktemp("s3-data")
    port = free_base(1)
    server = subprocess.Popen(
        [found["S3S_FS"], "--host", "127.0.0.1", "--port", str(port), "--access-key",
         S3_KEYS[0], "--secret-key", S3_KEYS[1], str(data)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            assert server.poll() is None, f"s3s-fs exited: {server.returncode}"
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        else:
            raise AssertionError(f"s3s-fs did not listen on 127.0.0.1:{port} in 60 s")
        store = S3(endpoint=f"http://127.0.0.1:{port}", python=found["PYTHON"])
        store.client("create-bucket", "artifacts")
        yield store
    finally:
        server.kill()
        server.wait()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    check_prims_binary()
    base = free_base(NODES + 1)
    d = Path(f"/var/tmp/prims-cluster-test-{os.getpid()}")
    # Nodes may upload to the loopback S3 server.
    extra = tmp_path_factory.mktemp("cluster") / "policy.toml"
    extra.write_text('[egress]\nallow = ["127.0.0.1/32"]\n')
    env = {**os.environ, "PRIMS_CLUSTER_DIR": str(d), "PRIMS_CLUSTER_PORT": str(base),
           "PRIMS_BIN": str(PRIMS), "PRIMS_DRAIN_DEADLINE": f"{DRAIN_S}s",
           "PRIMS_CLUSTER_POLICY": str(extra)}
    c = Cluster(url="", dir=d, env=env)
    try:
        out = c.script("up", str(NODES), timeout=600)
        c.url = out.strip().splitlines()[-1]
        assert c.url == f"http://127.0.0.1:{base}/mcp", out
        yield c
    finally:
        subprocess.run([str(SCRIPT), "down"], env=env, capture_output=True, timeout=300)


async def test_affinity_in_both_eras(cluster):
    async with connect_legacy_observed(cluster) as conn:
        header = conn.session_header
        assert len(header) > 5 and header[4] == "-", header
        first = await run_ok(conn.client, "x = 1")
        assert first["session_id"][:4] == header[:4], (first, header)
        for i in range(8):
            r = await run_ok(conn.client, "x += 1\nx")
            assert (r["result"], r["session_id"]) == (str(i + 2), first["session_id"]), r
    async with connect(cluster, "auto") as c:
        await c.list_tools()
        sid = (await run_ok(c, "y = 10"))["session_id"]
        for i in range(8):
            r = await run_ok(c, "y += 1\ny", session_id=sid)
            assert (r["result"], r["session_id"]) == (str(11 + i), sid), r


async def test_new_sessions_go_to_the_least_loaded_node(cluster):
    async with connect(cluster, "auto") as a, connect(cluster, "auto") as b, \
            connect(cluster, "auto") as c:
        got: dict[str, dict] = {}

        async def long(name, client):
            got[name] = await run_ok(client, "import time; time.sleep(3)")

        async with anyio.create_task_group() as tg:
            tg.start_soon(long, "a", a)
            await anyio.sleep(0.7)
            tg.start_soon(long, "b", b)
            await anyio.sleep(0.7)
            got["c"] = await run_ok(c, "1")
        nodes = {k: node_of(v["session_id"]) for k, v in got.items()}
        # Two nodes each hold a running call: the third session goes to the idle one.
        assert len(set(nodes.values())) == 3, nodes


async def test_a_killed_nodes_sessions_say_they_are_gone(cluster, s3):
    async with connect(cluster, "auto") as c, contextlib.AsyncExitStack() as held:
        await c.list_tools()
        sid = (await run_ok(c, "open('output/kept.txt', 'w').write('kept')"))["session_id"]
        victim = node_of(sid)
        url = s3.client("presign-put", "artifacts", "kept.txt", "text/plain")["url"]
        up = ok(await c.call_tool("persist_artifact", {
            "relative_path": "kept.txt", "presigned_url": url, "session_id": sid}))
        assert up["status"] == 200 and up["uploaded_bytes"] == 4, up
        others = await sessions_on(c, cluster, "1", set(range(NODES)) - {victim})
        legacy = await legacy_client_on(held, cluster, victim)
        await run_ok(legacy.client, "x = 1")
        cluster.kill(victim)
        # At once (the router still thinks it up) and once health checks see it down.
        for _ in range(2):
            # A legacy MCP session of the lost node: 404, the protocol's
            # "start a new session", with a JSON-RPC error that says why,
            # which the SDK raises.
            status, _, body = post_raw(cluster.url, CALL, session=legacy.session_header)
            assert status == 404, (status, body, cluster.router_view())
            msg = json.loads(body)["error"]["message"]
            assert f"lives on PRIMS node {victim}" in msg and "down or gone" in msg, msg
            with pytest.raises(MCPError) as raised:
                await legacy.client.call_tool("run_code", {"code": "print(x)"})
            assert f"lives on PRIMS node {victim}" in str(raised.value), raised.value
            for call in (lambda: run(c, "print(1)", session_id=sid),
                         lambda: c.call_tool("list_dir", {"dir_path": "output", "session_id": sid})):
                try:
                    result = await call()
                except Exception as e:
                    pytest.fail(f"a call for the lost node's session failed at the HTTP level: "
                                f"{e!r}\nrouter:\n{cluster.router_view()}")
                msg = err(result)
                assert f"lives on PRIMS node {victim}" in msg and "down or gone" in msg, msg
            await anyio.sleep(2.5)
        for s in others.values():
            await run_ok(c, "1", session_id=s)
        fresh = await run_ok(c, "1")
        assert node_of(fresh["session_id"]) != victim, fresh
        # What the session persisted outlives its node.
        got = s3.client("get", "artifacts", "kept.txt")
        assert got["found"] and bytes.fromhex(got["body_hex"]) == b"kept", got
    # The node comes back on its state directory, with the session's files.
    cluster.start(victim)
    async with connect(cluster, "auto") as c:
        await c.list_tools()
        r = await run_ok(c, "print(open('output/kept.txt').read())", session_id=sid)
        assert r["stdout"] == "kept\n", r
        assert (r["state"], r["state_reason"]) == ("reset", "server_restarted"), r


async def test_a_drain_loses_no_running_call(cluster):
    async with connect(cluster, "auto") as c, connect(cluster, "auto") as c2:
        await c.list_tools()
        await c2.list_tools()
        sid = (await run_ok(c, "z = 5"))["session_id"]
        node = node_of(sid)
        pid = cluster.pid(node)
        got: dict[str, dict] = {}

        async def long():
            got["long"] = await run_ok(c, "import time; time.sleep(3); z * 2", session_id=sid)

        async with anyio.create_task_group() as tg:
            tg.start_soon(long)
            await anyio.sleep(1)
            os.kill(pid, signal.SIGTERM)
            await anyio.sleep(0.3)
            # New sessions go to other nodes at once: the draining node answers
            # 503 to a request that names no session, and the router retries.
            for _ in range(4):
                r = await run_ok(c2, "1")
                assert node_of(r["session_id"]) != node, r
            # Its own sessions are still served.
            got["during"] = await run_ok(c2, "z + 1", session_id=sid)
        assert got["long"]["result"] == "10", got
        assert got["during"]["result"] == "6", got
    # It stops at its drain deadline.
    deadline = time.monotonic() + DRAIN_S + 20
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        await anyio.sleep(0.2)
    else:
        pytest.fail(f"node {node} still runs after its drain deadline:\n{cluster.log(node)}")
    assert "draining" in cluster.log(node)
    (cluster.dir / f"node{node}" / "serve.pid").unlink()
    cluster.start(node)


async def test_a_rolling_restart_fails_no_call_on_a_node_that_is_up(cluster):
    async with connect(cluster, "auto") as c:
        await c.list_tools()
        sessions = await sessions_on(c, cluster, "n = 0", set(range(NODES)))
    calls: list[tuple[int, float, float, bool, str]] = []
    down: dict[int, tuple[float, float]] = {}
    done = anyio.Event()

    async def hammer(node: int, sid: str):
        async with connect(cluster, "auto") as client:
            await client.list_tools()
            while not done.is_set():
                t0 = time.monotonic()
                try:
                    r = await run(client, "1", session_id=sid)
                    ok, said = not r.is_error, text_of(r)
                except Exception as e:  # an HTTP error counts as a failed call
                    ok, said = False, repr(e)
                calls.append((node, t0, time.monotonic(), ok, said))
                await anyio.sleep(0.05)

    async with anyio.create_task_group() as tg:
        for node, sid in sessions.items():
            tg.start_soon(hammer, node, sid)
        await anyio.sleep(1)
        for node in sorted(sessions):
            # SIGTERM: the node drains for DRAIN_S, then stops.
            drained = time.monotonic() + DRAIN_S
            await anyio.to_thread.run_sync(cluster.stop, node)
            await anyio.to_thread.run_sync(cluster.start, node)
            down[node] = (drained, time.monotonic())
            await anyio.sleep(1)
        done.set()

    per_node = {n: sum(1 for c in calls if c[0] == n and c[3]) for n in sessions}
    assert all(v > 5 for v in per_node.values()), per_node
    for node, t0, t1, ok, msg in calls:
        if ok:
            continue
        drained, back = down[node]
        # A call may fail only once its node's drain is over (it then stops)
        # and before the node is back: never while it drains.
        assert t1 > drained - 0.5 and t0 < back + 0.5, (
            f"a call on node {node} failed while the node was up ({t0:.1f}-{t1:.1f}, "
            f"down {drained:.1f}-{back:.1f}): {msg}")
