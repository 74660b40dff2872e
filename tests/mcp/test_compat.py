"""What works in bare Python works in PRIMS.

Each file of `compat/snippets/` is an everyday piece of Python, of the kind
data and agent code runs: the standard library (files, archives, JSON and
CSV, sqlite, logging, threads, `multiprocessing` with every start method,
`concurrent.futures`, subprocesses and the shell, signals, mmap, `/dev/shm`,
asyncio, loopback servers over IPv4 and IPv6), and numpy, pandas, scipy,
scikit-learn and joblib in worker processes, matplotlib, requests, pytest.
Each asserts what it does and ends by printing `OK <name>`.

Every snippet runs twice:

- bare: `python snippet.py` in a venv made from /usr/bin/python3 with the
  pins of `compat/requirements.txt` (`target/compat-venv`, rebuilt only when
  the pins change), with a fresh temporary directory as its working
  directory;
- in PRIMS: as a `run_code` cell, all snippets in order in ONE session of a
  `prims serve` whose base environment has the same pins (its
  `python.default_packages`; the wheels come from the same wheelhouse,
  `/var/lib/prims-tests/compat-wheels`, via `python.find_links`). Two servers: one that
  forks its interpreters from a template (`interpreters.fork_templates`, the
  default) and one that starts every interpreter cold. Both keep the default
  limits (512 MiB of memory, 64 processes and threads, 30 s a call): the
  point is that ordinary code runs within them.

The rule, one test per (server, snippet): a snippet that passes bare must
pass in PRIMS (status "ok" and its `OK <name>` line), unless it is listed in
KNOWN_DIFFERENCES with the docs section that explains why (the test checks
the section exists, and fails once the snippet passes, so the table stays
honest). A snippet that fails bare is broken, and fails its tests.

The numbers ("compat forked: 47 of 47 that work in bare python work in
PRIMS") are printed at the end of the module and written, with every
snippet's outcome, to target/test-outputs/compat/report.json.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pytest

import conftest
from conftest import PrimsServer
from prims_test_util import connect

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
COMPAT = HERE / "compat"
SNIPPETS = {p.stem: p for p in sorted((COMPAT / "snippets").glob("*.py"))}
REQUIREMENTS = COMPAT / "requirements.txt"
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
VENV = TARGET / "compat-venv"
# The servers bind the wheelhouse into their build jails (`python.find_links`),
# which refuse a target under /tmp: a checkout may lie there (CI clones to
# one), so it lives beside the tests' IPython layer instead.
WHEELS = Path(os.environ.get("PRIMS_COMPAT_WHEELS", "/var/lib/prims-tests/compat-wheels"))
REPORT = TARGET / "test-outputs" / "compat" / "report.json"
HOST_PYTHON = os.environ.get("PRIMS_COMPAT_PYTHON", "/usr/bin/python3")

# A server builds its base environment (the pins above) before /health
# answers 200: about a minute from the wheelhouse, longer where uv must
# download.
HEALTH_TIMEOUT_S = max(900.0, conftest.HEALTH_TIMEOUT_S)
BARE_TIMEOUT_S = 120
# A snippet is meant to take a few seconds; one that takes this long bare has
# rotted (PRIMS's own per-call limit is limits.wall_time, 30 s by default).
BARE_SLOW_S = 30
# run_code refuses larger code.
MAX_CELL_CHARS = 20_000

MODES = {
    # The default: interpreters are forked from a template per environment.
    "forked": "",
    # Every interpreter starts cold.
    "cold": "[interpreters]\nfork_templates = false\n",
}

# Snippets that work in bare Python and, by design, not in PRIMS: name ->
# "docs/<file>.md#<anchor>", the section that says why. Keep it short.
KNOWN_DIFFERENCES: dict[str, str] = {}


# ---------------------------------------------------------------- outcomes


@dataclass
class Outcome:
    """How one snippet ended on one side."""

    ok: bool
    summary: str  # exit status, or PRIMS's status/state
    stdout: str = ""
    stderr: str = ""
    seconds: float = 0.0
    detail: dict = field(default_factory=dict)

    def tails(self, label: str, lines: int = 25) -> str:
        def tail(text: str) -> str:
            kept = text.rstrip("\n").splitlines()[-lines:]
            return "\n".join("    " + line for line in kept) or "    (empty)"

        return (
            f"--- {label}: {self.summary} ({self.seconds:.1f} s)\n"
            f"  stdout (last {lines} lines):\n{tail(self.stdout)}\n"
            f"  stderr (last {lines} lines):\n{tail(self.stderr)}"
        )


def ok_line(name: str) -> str:
    return f"OK {name}"


def printed_ok(name: str, stdout: str) -> bool:
    return ok_line(name) in (line.strip() for line in stdout.splitlines())


# ---------------------------------------------------------------- the bare side


def _requirements_hash() -> str:
    version = subprocess.run([HOST_PYTHON, "--version"], capture_output=True, text=True).stdout
    return hashlib.sha256(REQUIREMENTS.read_bytes() + version.encode()).hexdigest()[:16]


def _pip(python: Path, *args: str, timeout: float = 900) -> None:
    cmd = [str(python), "-m", "pip", "--disable-pip-version-check", "-q", *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        pytest.fail(
            f"`{' '.join(cmd)}` failed ({p.returncode}):\n{(p.stdout + p.stderr)[-3000:]}",
            pytrace=False,
        )


def ensure_venv() -> Path:
    """target/compat-venv with the pins, and the wheelhouse WHEELS with their
    wheels (what the servers install from); both only when the pins change."""
    if not Path(HOST_PYTHON).is_file():
        pytest.fail(f"{HOST_PYTHON} not found: the bare side needs Python 3.11", pytrace=False)
    TARGET.mkdir(parents=True, exist_ok=True)
    stamp_name = f".prims-compat-{_requirements_hash()}"
    python = VENV / "bin" / "python"
    with open(TARGET / "compat-setup.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        fresh = not (VENV / stamp_name).is_file()
        if fresh:
            shutil.rmtree(VENV, ignore_errors=True)
            subprocess.run([HOST_PYTHON, "-m", "venv", str(VENV)], check=True)
        if not (WHEELS / stamp_name).is_file():
            shutil.rmtree(WHEELS, ignore_errors=True)
            WHEELS.mkdir(parents=True)
            # The host's Python (the jails' interpreter too) picks the wheels
            # for its version and platform.
            _pip(python, "download", "--only-binary=:all:", "-d", str(WHEELS),
                 "-r", str(REQUIREMENTS))
            # Build jails read them as an unprivileged user.
            for p in [WHEELS, *WHEELS.iterdir()]:
                p.chmod(0o755 if p.is_dir() else 0o644)
            (WHEELS / stamp_name).touch()
        if fresh:
            _pip(python, "install", "--no-index", "--find-links", str(WHEELS),
                 "-r", str(REQUIREMENTS))
            _pip(python, "check")
            (VENV / stamp_name).touch()
    return python


def run_bare(python: Path, name: str) -> Outcome:
    """`python snippet.py` in a fresh temporary directory, as a user of the
    venv runs it (its bin first on PATH)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYTEST_"))}
    env["PATH"] = f"{python.parent}:{env.get('PATH', '/usr/bin:/bin')}"
    env["VIRTUAL_ENV"] = str(python.parent.parent)
    with tempfile.TemporaryDirectory(prefix=f"compat-bare-{name}-") as cwd:
        started = time.monotonic()
        proc = subprocess.Popen(
            [str(python), str(SNIPPETS[name])], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=BARE_TIMEOUT_S)
            summary = f"exit {proc.returncode}"
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            summary = f"timed out after {BARE_TIMEOUT_S} s"
        finally:
            try:  # whatever the snippet left behind
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        seconds = time.monotonic() - started
    ok = proc.returncode == 0 and printed_ok(name, out)
    return Outcome(ok, summary, out, err, seconds)


# ---------------------------------------------------------------- the PRIMS side


def compat_policy(server: PrimsServer, mode: str) -> str:
    """conftest's test policy, with the pins as the base environment. The
    limits stay the defaults: no snippet needs more (the heaviest point is
    sklearn_fit_predict with its two loky workers, after everything before
    it was imported: about 440 MiB of anonymous memory in the session)."""
    pins = [
        line.split("#", 1)[0].strip()
        for line in REQUIREMENTS.read_text().splitlines()
        if line.split("#", 1)[0].strip()
    ]
    text = server.policy.read_text()
    assert "default_packages = []\n" in text, text
    return text.replace(
        "default_packages = []\n",
        f"default_packages = {json.dumps(pins)}\n"
        # The wheels the bare venv was installed from; the index is PyPI as
        # usual, for anything missing there.
        f"find_links = {json.dumps([str(WHEELS)])}\n",
    ) + MODES[mode]


class Servers:
    """Both servers, started in the background at once: building a base
    environment takes a while, and the bare side runs meanwhile."""

    def __init__(self) -> None:
        self.servers: dict[str, PrimsServer] = {}
        self.errors: dict[str, str] = {}
        self.threads: dict[str, threading.Thread] = {}

    def start(self) -> None:
        for mode in MODES:
            s = PrimsServer(tag=f"compat-{mode}-{os.getpid()}-{os.urandom(3).hex()}")
            s.policy.write_text(compat_policy(s, mode))
            self.servers[mode] = s
            t = threading.Thread(target=self._start, args=(mode, s), daemon=True)
            t.start()
            self.threads[mode] = t

    def _start(self, mode: str, s: PrimsServer) -> None:
        try:
            s.start()
        except BaseException as e:  # pytest.fail raises an OutcomeException
            self.errors[mode] = str(e) or repr(e)

    def get(self, mode: str) -> PrimsServer:
        self.threads[mode].join()
        if mode in self.errors:
            pytest.fail(f"the {mode} server did not start:\n{self.errors[mode]}", pytrace=False)
        return self.servers[mode]

    def stop(self) -> None:
        for mode, t in self.threads.items():
            t.join()
            self.servers[mode].stop()


async def run_session(server: PrimsServer, outcomes: dict[str, Outcome]) -> None:
    """Every snippet as the next cell of one session, in order, into `outcomes`."""
    async with connect(server, "auto") as c:
        sid = None
        for name, path in SNIPPETS.items():
            args: dict = {"code": path.read_text()}
            if sid is not None:
                args["session_id"] = sid
            started = time.monotonic()
            try:
                r = await c.call_tool("run_code", args)
            except Exception as e:  # the call itself failed: record it, go on
                outcomes[name] = Outcome(False, f"run_code raised {type(e).__name__}: {e}",
                                         seconds=time.monotonic() - started)
                continue
            sc = r.structured_content if isinstance(r.structured_content, dict) else {}
            sid = sc.get("session_id", sid)
            text = " ".join(getattr(x, "text", "") for x in r.content)[:2000]
            status = sc.get("status", f"isError={r.is_error}: {text}")
            summary = (f"status {status}, interpreter {sc.get('state')} ({sc.get('state_reason')}), "
                       f"peak memory {(sc.get('memory_peak_bytes') or 0) >> 20} MiB")
            stdout, stderr = sc.get("stdout", ""), sc.get("stderr", "")
            outcomes[name] = Outcome(
                status == "ok" and printed_ok(name, stdout), summary, stdout, stderr,
                time.monotonic() - started,
                {k: sc.get(k) for k in ("status", "state", "state_reason", "exit_code", "signal",
                                        "timed_out", "oom_killed", "duration_ms", "cpu_ms",
                                        "memory_peak_bytes")},
            )


# ---------------------------------------------------------------- fixtures


class Runs:
    """Outcomes of both sides, each computed once, on first use."""

    def __init__(self, servers: Servers, python: Path) -> None:
        self.servers = servers
        self.python = python
        self.bare: dict[str, Outcome] = {name: run_bare(python, name) for name in SNIPPETS}
        self.prims: dict[str, dict[str, Outcome]] = {}
        self.prims_seconds: dict[str, float] = {}

    def in_prims(self, mode: str) -> dict[str, Outcome]:
        if mode not in self.prims:
            server = self.servers.get(mode)
            outcomes: dict[str, Outcome] = {}
            self.prims[mode] = outcomes
            started = time.monotonic()
            try:
                asyncio.run(run_session(server, outcomes))
            except Exception as e:  # the client or the connection broke
                lost = f"the session broke off before this snippet ran: {type(e).__name__}: {e}"
                for name in SNIPPETS:
                    outcomes.setdefault(name, Outcome(False, lost, stderr=server.log(40)))
            self.prims_seconds[mode] = time.monotonic() - started
        return self.prims[mode]

    def summary(self) -> list[str]:
        works_bare = [n for n, o in self.bare.items() if o.ok]
        lines = []
        for mode, outcomes in self.prims.items():
            same = [n for n in works_bare if outcomes.get(n) and outcomes[n].ok]
            known = [n for n in works_bare if n in KNOWN_DIFFERENCES and n in outcomes and not outcomes[n].ok]
            lines.append(
                f"compat {mode}: {len(same)} of {len(works_bare)} that work in bare python "
                f"work in PRIMS ({len(known)} documented differences; "
                f"{len(SNIPPETS)} snippets; session {self.prims_seconds[mode]:.0f} s)"
            )
        return lines

    def write_report(self) -> None:
        REPORT.parent.mkdir(parents=True, exist_ok=True)
        REPORT.write_text(json.dumps({
            "summary": self.summary(),
            "known_differences": KNOWN_DIFFERENCES,
            "bare": {n: asdict(o) for n, o in self.bare.items()},
            "prims": {m: {n: asdict(o) for n, o in outs.items()} for m, outs in self.prims.items()},
        }, indent=1))


@pytest.fixture(scope="module")
def compat_runs(request):
    conftest.check_prims_binary()
    python = ensure_venv()
    servers = Servers()
    runs = None
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(conftest, "HEALTH_TIMEOUT_S", HEALTH_TIMEOUT_S)
        try:
            servers.start()
            runs = Runs(servers, python)
            yield runs
        finally:
            servers.stop()
            if runs is not None:
                runs.write_report()
    # Past output capture, so that it shows whatever the tests' outcomes.
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print("\n" + "\n".join(runs.summary()), flush=True)


# ---------------------------------------------------------------- tests


def github_anchor(heading: str) -> str:
    """The #fragment GitHub gives a Markdown heading."""
    slug = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return slug.replace(" ", "-")


def check_documented(name: str) -> str:
    where = KNOWN_DIFFERENCES[name]
    doc, _, anchor = where.partition("#")
    path = REPO / doc
    assert doc.startswith("docs/") and anchor, (
        f"KNOWN_DIFFERENCES[{name!r}] = {where!r}: want 'docs/<file>.md#<anchor>'"
    )
    assert path.is_file(), f"KNOWN_DIFFERENCES[{name!r}] names {doc}, which does not exist"
    headings = [m.group(1) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*\s*$", path.read_text(), re.M)]
    assert anchor in {github_anchor(h) for h in headings}, (
        f"KNOWN_DIFFERENCES[{name!r}]: {doc} has no heading with the anchor #{anchor}"
    )
    return where


def test_the_snippets_are_well_formed():
    assert len(SNIPPETS) >= 30, sorted(SNIPPETS)
    for name in KNOWN_DIFFERENCES:
        assert name in SNIPPETS, f"KNOWN_DIFFERENCES names {name!r}, which is no snippet"
        check_documented(name)
    for name, path in SNIPPETS.items():
        # pytest (testpaths = .) must never collect a snippet as a test module.
        assert not (name.startswith("test_") or name.endswith("_test")), path
        assert re.fullmatch(r"[a-z0-9_]+", name), f"{path.name}: lower-case names only"
        code = path.read_text()
        assert len(code) < MAX_CELL_CHARS, f"{path.name} is too long for one run_code cell"
        assert f'print("{ok_line(name)}")' in code, f"{path.name} never prints {ok_line(name)!r}"


@pytest.mark.parametrize(
    "mode,name", [(m, n) for m in MODES for n in SNIPPETS], ids=[f"{m}-{n}" for m in MODES for n in SNIPPETS]
)
def test_what_works_bare_works_in_prims(compat_runs: Runs, mode: str, name: str):
    bare = compat_runs.bare[name]
    if not bare.ok:
        pytest.fail(
            f"{name} is broken: it fails in bare python ({VENV}), so it proves nothing. "
            f"Fix the snippet.\n{bare.tails('bare python')}",
            pytrace=False,
        )
    if bare.seconds > BARE_SLOW_S:
        pytest.fail(f"{name} took {bare.seconds:.0f} s in bare python: snippets must be quick",
                    pytrace=False)
    prims = compat_runs.in_prims(mode)[name]
    if name in KNOWN_DIFFERENCES:
        where = check_documented(name)
        if prims.ok:
            pytest.fail(
                f"{name} passes in PRIMS ({mode}) now: remove it from KNOWN_DIFFERENCES ({where})",
                pytrace=False,
            )
        pytest.xfail(f"a documented difference: {where}")
    if not prims.ok:
        pytest.fail(
            f"{name} works in bare python but not in PRIMS ({mode} interpreters: one session, "
            f"every snippet in order, this one as a run_code cell).\n"
            f"{prims.tails(f'PRIMS {mode}')}\n{bare.tails('bare python', lines=5)}",
            pytrace=False,
        )
