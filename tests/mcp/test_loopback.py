"""Each session's loopback is its own, through MCP with the default policy.

A cell may serve and connect on 127.0.0.1 and ::1 as on any machine: a
server it starts in a thread keeps serving between calls, and urllib
reaches it. From there it reaches nothing of the host: not the front-end
that runs it (its port, on the jail's own loopback, is free to take), not
the supervisor's socket, not another session's server, not the outside.
"""

from __future__ import annotations

from prims_test_util import connect, run_ok

SERVE = """\
import http.server, socketserver, threading
class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b'from ' + NAME.encode()
        self.send_response(200)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = socketserver.ThreadingTCPServer(('127.0.0.1', PORT), Hello)
threading.Thread(target=server.serve_forever, daemon=True).start()
print('serving', server.server_address[1])
"""

PROBE = """\
import errno, socket
def attempt(family, host, port):
    s = socket.socket(family)
    s.settimeout(3)
    try:
        s.connect((host, port))
        return 'connected'
    except OSError as e:
        return errno.errorcode[e.errno]
    finally:
        s.close()
"""


async def test_a_cell_serves_on_its_own_loopback_and_reaches_nothing_of_the_hosts(server):
    port = server.port
    async with connect(server, "auto") as c:
        a = await run_ok(c, PROBE + f"NAME, PORT = 'a', {port}\n" + SERVE)
        sid_a = a["session_id"]
        # The front-end's own port is free in the jail: A serves on it.
        assert a["status"] == "ok" and a["stdout"] == f"serving {port}\n", a
        b = await run_ok(
            c,
            PROBE
            + f"print(attempt(socket.AF_INET, '127.0.0.1', {port}))\n"
            + f"print(attempt(socket.AF_INET6, '::1', {port}))\n"
            + "print(attempt(socket.AF_INET, '169.254.169.254', 80))\n"
            + "def unix(path):\n"
            + "    s = socket.socket(socket.AF_UNIX)\n"
            + "    try:\n"
            + "        s.connect(path)\n"
            + "        return 'connected'\n"
            + "    except OSError as e:\n"
            + "        return errno.errorcode[e.errno]\n"
            + f"print(unix({str(server.state_dir / 'supervisor.sock')!r}))\n",
        )
        # Neither A's server nor the front-end behind that port: B's own
        # loopback, where nothing listens; no route out; no supervisor.
        assert b["status"] == "ok", b
        assert b["stdout"].split() == ["ECONNREFUSED", "ECONNREFUSED", "ENETUNREACH", "ENOENT"], b
        # A's server kept serving between its calls; urllib reaches it.
        again = await run_ok(
            c,
            "import urllib.request\n"
            f"print(urllib.request.urlopen('http://127.0.0.1:{port}/', timeout=5).read().decode())\n"
            f"print(urllib.request.urlopen('http://localhost:{port}/', timeout=5).read().decode())",
            session_id=sid_a,
        )
        assert again["status"] == "ok" and again["state"] == "kept", again
        assert again["stdout"] == "from a\nfrom a\n", again
