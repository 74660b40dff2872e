# http.server in a thread on 127.0.0.1, fetched with urllib (GET, POST, headers, errors),
# and a static file server over a directory.
import functools
import json
import os
import tempfile
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class Api(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _send(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path.startswith("/hello"):
            self._send(200, {"path": self.path, "agent": self.headers.get("User-Agent")})
        else:
            self._send(404, {"error": "not found"})

    def do_POST(self):
        n = int(self.headers["Content-Length"])
        data = json.loads(self.rfile.read(n))
        self._send(201, {"sum": sum(data["values"])})


httpd = ThreadingHTTPServer(("127.0.0.1", 0), Api)
thread = threading.Thread(target=httpd.serve_forever, daemon=True)
thread.start()
base = f"http://127.0.0.1:{httpd.server_address[1]}"
try:
    req = urllib.request.Request(base + "/hello?x=1", headers={"User-Agent": "compat/1"})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 200 and json.load(r) == {"path": "/hello?x=1", "agent": "compat/1"}
    post = urllib.request.Request(base + "/sum", data=json.dumps({"values": [1, 2, 3]}).encode(),
                                  headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(post, timeout=10) as r:
        assert r.status == 201 and json.load(r) == {"sum": 6}
    try:
        urllib.request.urlopen(base + "/missing", timeout=10)
    except urllib.error.HTTPError as e:
        assert e.code == 404 and json.load(e) == {"error": "not found"}
    else:
        raise AssertionError("no 404")
finally:
    httpd.shutdown()
    httpd.server_close()
    thread.join(10)

root = Path(tempfile.mkdtemp(prefix="compat_static_", dir=os.getcwd()))
(root / "index.html").write_text("<h1>static</h1>")
(root / "data.csv").write_text("a,b\n1,2\n")


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


handler = functools.partial(Quiet, directory=str(root))
static = ThreadingHTTPServer(("127.0.0.1", 0), handler)
t = threading.Thread(target=static.serve_forever, daemon=True)
t.start()
try:
    url = f"http://127.0.0.1:{static.server_address[1]}"
    assert urllib.request.urlopen(url + "/", timeout=10).read() == b"<h1>static</h1>"
    with urllib.request.urlopen(url + "/data.csv", timeout=10) as r:
        assert r.read() == b"a,b\n1,2\n" and r.headers["Content-Type"] == "text/csv"
finally:
    static.shutdown()
    static.server_close()
    t.join(10)
print("OK http_server_urllib")
