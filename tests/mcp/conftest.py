"""The PRIMS server under test: one real `prims serve` for the whole pytest run.

`target/debug/prims serve` is started as root with its own state directory
and a test policy (no default packages, a unique cgroup parent and uid range,
egress allowed to 127.0.0.1 for the loopback download/upload servers), on a
free loopback port. The fixture waits for `GET /health` to answer 200. On
teardown it sends SIGTERM, waits, kills what is left, unmounts everything
mounted below its temporary directory (the loop-mounted session images) and
removes it.

Set PRIMS_BIN to test another binary, or PRIMS_MCP_URL to run the client
tests against a server that is already running (the lifecycle test still
starts its own). There is no fallback: if the binary or
its `serve` subcommand is missing, every test fails and says so.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
PRIMS = Path(os.environ.get("PRIMS_BIN", str(REPO / "target" / "debug" / "prims")))
IPYTHON_SITE = Path(os.environ.get("PRIMS_IPYTHON_SITE", "/var/lib/prims-tests/ipython-site"))
HEALTH_TIMEOUT_S = float(os.environ.get("PRIMS_MCP_HEALTH_TIMEOUT", "120"))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _unescape_mountinfo(path: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo.
    out, i = [], 0
    while i < len(path):
        if path[i] == "\\" and i + 4 <= len(path) and path[i + 1 : i + 4].isdigit():
            out.append(chr(int(path[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(path[i])
            i += 1
    return "".join(out)


def mounts_below(directory: Path) -> list[str]:
    points = []
    try:
        info = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return points
    prefix = str(directory).rstrip("/") + "/"
    for line in info.splitlines():
        fields = line.split(" ")
        if len(fields) > 4:
            point = _unescape_mountinfo(fields[4])
            if point == str(directory) or point.startswith(prefix):
                points.append(point)
    return points


def unmount_below(directory: Path) -> None:
    """Lazily unmount every mount below `directory`, deepest first."""
    for _ in range(3):
        points = mounts_below(directory)
        if not points:
            return
        for point in sorted(set(points), key=len, reverse=True):
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)


def remove_cgroup_dirs(name: str) -> None:
    """rmdir every cgroup directory called `name` (and its job children)."""
    root = Path("/sys/fs/cgroup")

    def walk(d: Path, depth: int) -> None:
        if depth > 6:
            return
        try:
            children = [c for c in d.iterdir() if c.is_dir()]
        except OSError:
            return
        for c in children:
            if c.name == name:
                for job in sorted(c.rglob("*"), key=lambda p: len(p.parts), reverse=True):
                    if job.is_dir():
                        try:
                            job.rmdir()
                        except OSError:
                            pass
                try:
                    c.rmdir()
                except OSError:
                    pass
            else:
                walk(c, depth + 1)

    if root.is_dir():
        walk(root, 0)


def descendants(pid: int) -> list[int]:
    """Every live descendant of `pid`, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses.
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def pid_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def check_prims_binary() -> None:
    """Fail (never skip) with a clear reason when `prims serve` cannot run."""
    if os.geteuid() != 0:
        pytest.fail(
            "tests/mcp needs root: `prims serve` starts the privileged supervisor "
            "(namespaces, cgroups, loop-mounted workspaces). Run tests/mcp/run.sh as root.",
            pytrace=False,
        )
    if not PRIMS.is_file():
        pytest.fail(
            f"{PRIMS} does not exist: build it with `cargo build --workspace` "
            "(tests/mcp/run.sh does this).",
            pytrace=False,
        )
    probe = subprocess.run(
        [str(PRIMS), "serve", "--help"], capture_output=True, text=True, timeout=30, check=False
    )
    if probe.returncode != 0:
        said = (probe.stderr or probe.stdout).strip().splitlines()[-8:]
        pytest.fail(
            f"{PRIMS} has no working `serve` subcommand yet (the MCP front-end of issue 4 "
            f"is not built): `prims serve --help` exited {probe.returncode}:\n  "
            + "\n  ".join(said),
            pytrace=False,
        )


def make_policy(cgroup_parent: str, uid_base: int) -> str:
    return (
        "[python]\n"
        "default_packages = []\n"
        # The IPython layer scripts/ipython-site.sh makes (run.sh runs it):
        # IPython and matplotlib without a download per server.
        f'ipython_site = "{IPYTHON_SITE}"\n'
        "[cgroup]\n"
        f'parent = "{cgroup_parent}"\n'
        "[identity]\n"
        f"uid_base = {uid_base}\n"
        "uid_count = 1000\n"
        "[egress]\n"
        'allow = ["127.0.0.1/32"]\n'
        # Each workspace reserves its whole quota on disk.
        "[sessions]\n"
        'disk_quota = "256MiB"\n'
    )


@dataclass
class PrimsServer:
    """One `prims serve` process with its own temporary directory."""

    tag: str = field(default_factory=lambda: f"{os.getpid()}-{random.randrange(1 << 30):x}")
    dir: Path = field(init=False)
    port: int = 0
    proc: subprocess.Popen | None = None
    cgroup_parent: str = field(init=False)

    def __post_init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=f"prims-mcp-test-{self.tag}-", dir="/var/tmp"))
        # mkdtemp makes it 0700; the front-end runs unprivileged and must
        # reach the supervisor's socket inside the state directory.
        os.chmod(self.dir, 0o755)
        self.cgroup_parent = f"prims-mcp-test-{self.tag}"
        uid_base = 3_000_000 + random.randrange(4000) * 1000
        self.policy.write_text(make_policy(self.cgroup_parent, uid_base))

    @property
    def policy(self) -> Path:
        return self.dir / "policy.toml"

    @property
    def state_dir(self) -> Path:
        return self.dir / "state"

    @property
    def log_path(self) -> Path:
        return self.dir / "serve.log"

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    def log(self, tail: int = 60) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(lines[-tail:])

    def start(self) -> None:
        check_prims_binary()
        last_error = ""
        for _attempt in range(3):
            self.port = free_port()
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen(
                    [
                        str(PRIMS), "serve",
                        "--listen", f"127.0.0.1:{self.port}",
                        "--state-dir", str(self.state_dir),
                        "--policy", str(self.policy),
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "info")},
                    start_new_session=True,
                )
            ok, last_error = self._wait_healthy()
            if ok:
                return
            self.stop_process()
            if "in use" not in self.log(20).lower():
                break
        log = self.log()
        self.cleanup()
        pytest.fail(f"`prims serve` did not become healthy: {last_error}\n--- serve log ---\n{log}",
                    pytrace=False)

    def _wait_healthy(self) -> tuple[bool, str]:
        deadline = time.monotonic() + HEALTH_TIMEOUT_S
        last = "no answer"
        while time.monotonic() < deadline:
            assert self.proc is not None
            rc = self.proc.poll()
            if rc is not None:
                return False, f"it exited with status {rc} before /health answered"
            try:
                with urllib.request.urlopen(f"{self.base}/health", timeout=5) as r:
                    if r.status == 200:
                        return True, ""
                    last = f"/health answered {r.status}"
            except urllib.error.HTTPError as e:
                last = f"/health answered {e.code}: {e.read()[:300]!r}"
            except (OSError, urllib.error.URLError) as e:
                last = f"/health: {e}"
            time.sleep(0.2)
        return False, f"no 200 from /health within {HEALTH_TIMEOUT_S:.0f} s (last: {last})"

    def stop_process(self, grace_s: float = 30.0) -> int | None:
        """SIGTERM, wait up to `grace_s`, then SIGKILL the whole process group."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
        # Whatever is left in its process group (a supervisor that did not stop).
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.proc.poll() is None:
            self.proc.kill()
        return self.proc.wait()

    def cleanup(self) -> None:
        unmount_below(self.dir)
        shutil.rmtree(self.dir, ignore_errors=True)
        remove_cgroup_dirs(self.cgroup_parent)

    def stop(self) -> None:
        self.stop_process()
        # A supervisor may take a moment to release its loop images.
        time.sleep(0.2)
        self.cleanup()


@dataclass
class ExternalServer:
    """A server someone else started (PRIMS_MCP_URL=http://127.0.0.1:PORT/mcp)."""

    url: str

    @property
    def base(self) -> str:
        return self.url.rsplit("/mcp", 1)[0]

    @property
    def port(self) -> int:
        return int(self.base.rsplit(":", 1)[1])


@contextmanager
def running_server():
    """A `prims serve` of its own, stopped and cleaned up on exit."""
    s = PrimsServer()
    try:
        s.start()
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="session")
def server():
    """The shared `prims serve` for this pytest session (see the module doc),
    or the already running server named by PRIMS_MCP_URL."""
    if os.environ.get("PRIMS_MCP_URL"):
        yield ExternalServer(os.environ["PRIMS_MCP_URL"])
        return
    with running_server() as s:
        yield s


@pytest.fixture
def fresh_server():
    """A private `prims serve` (for lifecycle tests that stop it)."""
    s = PrimsServer()
    try:
        yield s
    finally:
        s.stop()
