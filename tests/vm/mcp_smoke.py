"""MCP smoke test for the installed services, with the Python `mcp` SDK.

  mcp_smoke.py URL before STATE_FILE   run_code, OOM, fork bomb, write a file;
                                       saves the session id to STATE_FILE
  mcp_smoke.py URL after STATE_FILE    the file written before is still there
  mcp_smoke.py URL egress TARGET_URL    allowlist mode: the code fetches TARGET_URL
                                       through the egress proxy, and nothing else

Prints one PASS/FAIL line per check; exits 1 if any failed.
"""

import asyncio
import json
import sys

from mcp import Client

FAILS = 0


def check(name, cond, detail):
    global FAILS
    if cond:
        print(f"PASS {name}")
    else:
        FAILS += 1
        print(f"FAIL {name}: {json.dumps(detail)[:1500]}")


async def call(c, tool, **args):
    r = await c.call_tool(tool, args)
    sc = r.structured_content or {}
    if r.is_error:
        sc = {"error": [getattr(x, "text", "") for x in r.content]}
    return sc


HOG = "b = b'\\1' * (1 << 30)\nprint('survived')"
FORK_BOMB = """import os, time
n = 0
try:
    for i in range(500):
        if os.fork() == 0:
            time.sleep(5); os._exit(0)
        n += 1
except OSError as e:
    print("EAGAIN" if e.errno == 11 else e.errno, n)
"""


async def before(url, state):
    async with Client(url, mode="auto", read_timeout_seconds=300) as c:
        r = await call(c, "run_code", code="import os; print('hello', os.getuid(), os.getpid())")
        check("mcp_run_code_print", r.get("stdout") == "hello 1000 2\n" and r.get("status") == "ok", r)
        sid = r.get("session_id")

        r = await call(c, "run_code", code=HOG, session_id=sid)
        check("mcp_memory_hog_is_oom", r.get("status") == "oom" and r.get("oom_killed") is True
              and "survived" not in r.get("stdout", ""), r)

        r = await call(c, "run_code", code=FORK_BOMB, session_id=sid)
        out = r.get("stdout", "").split()
        check("mcp_fork_bomb_stops_at_pids_max", r.get("status") == "ok" and out[:1] == ["EAGAIN"]
              and int(out[1]) < 64, r)

        r = await call(c, "run_code", session_id=sid,
                       code="open('output/kept.txt', 'w').write('still here')\nprint('written')\n"
                            "kept = 41\ndef bump(v):\n    return v + 1")
        check("mcp_file_written", r.get("stdout") == "written\n"
              and any(a.get("name") == "kept.txt" for a in r.get("artifacts", [])), r)
    with open(state, "w") as f:
        f.write(sid or "")


async def after(url, state):
    sid = open(state).read().strip()
    async with Client(url, mode="auto", read_timeout_seconds=300) as c:
        r = await call(c, "preview_file", relative_path="output/kept.txt", session_id=sid)
        check("mcp_session_file_survives_restart", r.get("content") == "still here", r)
        r = await call(c, "run_code", code="print(open('output/kept.txt').read())", session_id=sid)
        check("mcp_session_runs_after_restart", r.get("stdout") == "still here\n"
              and r.get("session_id") == sid, r)
        # systemctl restart stops the supervisor gracefully: the session's
        # variables come back, and the call says so. (Without the IPython
        # layer there is no cloudpickle: a function defined in a cell is
        # named as not restored, with why, by the first restart's call; the
        # interpreter saved at the next restart never had it.)
        check("mcp_session_variables_restored_after_restart",
              r.get("state_reason") == "server_restarted" and "kept" in r.get("restored", [])
              and "bump" not in r.get("restored", []), r)
        r = await call(c, "run_code", code="print(kept + 1)", session_id=sid)
        check("mcp_session_variables_survive_restart", r.get("stdout") == "42\n", r)


FETCH = """import urllib.request
for url in ({target!r}, "http://10.99.0.2:8765/"):
    try:
        print(urllib.request.urlopen(url, timeout=20).read().decode().strip())
    except Exception as e:
        print(type(e).__name__, getattr(e, "code", ""))
"""


async def egress(url, target):
    async with Client(url, mode="auto", read_timeout_seconds=300) as c:
        r = await call(c, "run_code", code=FETCH.format(target=target))
        net = r.get("network") or {}
        check("mcp_egress_reaches_the_listed_server", r.get("stdout", "").splitlines()
              == ["hello-egress", "HTTPError 403"], r)
        check("mcp_egress_result_names_both", [a.get("host") for a in net.get("allowed", [])]
              == ["10.99.0.1"] and [d.get("host") for d in net.get("denied", [])]
              == ["10.99.0.2"], r)


def main():
    url, phase, arg = sys.argv[1:4]
    phases = {"before": before, "after": after, "egress": egress}
    asyncio.run(phases[phase](url, arg))
    sys.exit(1 if FAILS else 0)


if __name__ == "__main__":
    main()
