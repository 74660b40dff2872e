# socketserver: threaded TCP and UDP servers on the loopback, reached by "localhost"
# as well as by address, and a Unix stream server.
import os
import socket
import socketserver
import tempfile
import threading


class Upper(socketserver.StreamRequestHandler):
    def handle(self):
        for line in self.rfile:
            self.wfile.write(line.upper())


class Reverse(socketserver.BaseRequestHandler):
    def handle(self):
        data, sock = self.request
        sock.sendto(data[::-1], self.client_address)


def run(server):
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    return t


socketserver.ThreadingTCPServer.allow_reuse_address = True
tcp = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Upper)
tcp.daemon_threads = True
udp = socketserver.UDPServer(("127.0.0.1", 0), Reverse)
sock_dir = tempfile.mkdtemp(prefix="compat_unix_")
unix = socketserver.ThreadingUnixStreamServer(os.path.join(sock_dir, "s.sock"), Upper)
threads = [run(tcp), run(udp), run(unix)]
try:
    infos = socket.getaddrinfo("localhost", tcp.server_address[1], type=socket.SOCK_STREAM)
    assert any(ai[4][0] == "127.0.0.1" for ai in infos), infos
    for host in ("127.0.0.1", "localhost"):
        with socket.create_connection((host, tcp.server_address[1]), timeout=10) as c:
            f = c.makefile("rwb")
            for word in (b"alpha\n", b"beta\n"):
                f.write(word)
                f.flush()
                assert f.readline() == word.upper()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as c:
        c.settimeout(5)
        c.sendto(b"stressed", udp.server_address)
        assert c.recv(100) == b"desserts"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
        c.settimeout(5)
        c.connect(unix.server_address)
        c.sendall(b"unix\n")
        assert c.recv(100) == b"UNIX\n"
finally:
    for s in (tcp, udp, unix):
        s.shutdown()
        s.server_close()
    for t in threads:
        t.join(10)
os.unlink(os.path.join(sock_dir, "s.sock"))
os.rmdir(sock_dir)
print("OK socketserver_loopback")
