"""The container test's MCP client (tests/container-entrypoint.sh): defines
a session's variable and function, or checks them after a restart.

    container_session.py URL define          -> prints the session id
    container_session.py URL check SESSION   -> prints "kept"
"""

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "mcp"))

from prims_test_util import connect, run_ok  # noqa: E402


class Server:
    def __init__(self, url: str):
        self.url = url


async def main(url: str, what: str, session: str | None) -> None:
    async with connect(Server(url), "auto") as c:
        if what == "define":
            sc = await run_ok(c, "x = 41\ndef f(n):\n    return n + 1\n")
            print(sc["session_id"])
            return
        sc = await run_ok(c, "print(f(x))", session_id=session)
        if sc["stdout"] != "42\n" or sc["state_reason"] != "server_restarted":
            raise SystemExit(f"not kept: {sc}")
        print("kept")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None))
