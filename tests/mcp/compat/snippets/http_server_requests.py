# requests against a local http.server in a thread: a Session, JSON, query parameters,
# form posts, streaming, redirects, status errors, timeouts.
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import requests


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, code, body, ctype="application/json", extra=()):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        u = urlparse(self.path)
        if u.path == "/items":
            q = parse_qs(u.query)
            body = json.dumps({"page": int(q["page"][0]), "cookie": self.headers.get("Cookie")}).encode()
            self.reply(200, body, extra=[("Set-Cookie", "sid=abc")])
        elif u.path == "/old":
            self.reply(302, b"", extra=[("Location", "/items?page=9")])
        elif u.path == "/big":
            self.reply(200, b"z" * 1_000_000, "application/octet-stream")
        elif u.path == "/slow":
            time.sleep(1)
            try:
                self.reply(200, b"{}")
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up, as it should
        else:
            self.reply(500, b'{"error": "boom"}')

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        ctype = self.headers["Content-Type"]
        parsed = json.loads(body) if ctype == "application/json" else parse_qs(body.decode())
        self.reply(200, json.dumps({"ctype": ctype, "got": parsed}).encode())


httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
# server_close() waits for the handlers' threads (the slow one too).
httpd.daemon_threads = False
thread = threading.Thread(target=httpd.serve_forever, daemon=True)
thread.start()
base = f"http://127.0.0.1:{httpd.server_address[1]}"
try:
    with requests.Session() as s:
        r = s.get(base + "/items", params={"page": 2}, timeout=10)
        r.raise_for_status()
        assert r.json() == {"page": 2, "cookie": None}
        assert s.get(base + "/items", params={"page": 3}, timeout=10).json()["cookie"] == "sid=abc"
        r = s.get(base + "/old", timeout=10)
        assert r.status_code == 200 and r.history[0].status_code == 302 and r.json()["page"] == 9
        r = s.post(base + "/submit", json={"a": [1, 2]}, timeout=10)
        assert r.json() == {"ctype": "application/json", "got": {"a": [1, 2]}}
        r = s.post(base + "/submit", data={"name": "x y"}, timeout=10)
        assert r.json()["got"] == {"name": ["x y"]}
        with s.get(base + "/big", stream=True, timeout=10) as r:
            assert sum(len(c) for c in r.iter_content(65536)) == 1_000_000
        r = s.get(base + "/error", timeout=10)
        assert r.status_code == 500
        try:
            r.raise_for_status()
        except requests.HTTPError as e:
            assert e.response.json() == {"error": "boom"}
        try:
            s.get(base + "/slow", timeout=0.2)
        except requests.Timeout:
            pass
        else:
            raise AssertionError("no timeout")
    closed = httpd.server_address[1]
finally:
    httpd.shutdown()
    httpd.server_close()
    thread.join(10)
try:
    requests.get(f"http://127.0.0.1:{closed}/items", timeout=5)
except requests.ConnectionError:
    pass
else:
    raise AssertionError("a closed port answered")
print("OK http_server_requests")
