# Plain sockets on the IPv6 loopback (::1): a threaded TCP echo server, UDP, and
# socket.create_server / create_connection; plus an IPv4 one and a socketpair.
import socket
import threading


def serve(listener, count):
    for _ in range(count):
        conn, addr = listener.accept()
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)


assert socket.has_ipv6
srv = socket.create_server(("::1", 0), family=socket.AF_INET6, backlog=16)
port = srv.getsockname()[1]
t = threading.Thread(target=serve, args=(srv, 3), daemon=True)
t.start()
for i in range(3):
    with socket.create_connection(("::1", port), timeout=10) as c:
        assert c.family == socket.AF_INET6 and c.getpeername()[0] == "::1"
        payload = bytes([i]) * 200_000
        c.sendall(payload)
        c.shutdown(socket.SHUT_WR)
        got = bytearray()
        while chunk := c.recv(65536):
            got.extend(chunk)
        assert got == payload
t.join(10)
srv.close()

u = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
u.bind(("::1", 0))
c = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
c.settimeout(5)
u.settimeout(5)
for i in range(10):
    c.sendto(f"ping {i}".encode(), u.getsockname()[:2])
    data, addr = u.recvfrom(100)
    u.sendto(data.replace(b"ping", b"pong"), addr)
    assert c.recvfrom(100)[0] == f"pong {i}".encode()
u.close()
c.close()

v4 = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
v4.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
v4.bind(("127.0.0.1", 0))
v4.listen()
cli = socket.create_connection(v4.getsockname(), timeout=10)
peer, _ = v4.accept()
cli.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
cli.sendall(b"v4")
assert peer.recv(2) == b"v4"
for s in (cli, peer, v4):
    s.close()
if socket.has_dualstack_ipv6():
    dual = socket.create_server(("", 0), family=socket.AF_INET6, dualstack_ipv6=True)
    with socket.create_connection(("127.0.0.1", dual.getsockname()[1]), timeout=10):
        conn, addr = dual.accept()
        assert addr[0] == "::ffff:127.0.0.1"
        conn.close()
    dual.close()
a, b = socket.socketpair()
a.sendall(b"pair")
assert b.recv(4) == b"pair"
a.close()
b.close()
print("OK socket_ipv6")
