# An asyncio TCP server and clients on 127.0.0.1: a line protocol, many clients at once.
import asyncio


async def handle(reader, writer):
    while line := await reader.readline():
        cmd = line.decode().strip()
        if cmd == "quit":
            break
        writer.write(f"echo:{cmd.upper()}\n".encode())
        await writer.drain()
    writer.close()
    await writer.wait_closed()


async def client(port, n):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    replies = []
    for i in range(n):
        writer.write(f"msg {i}\n".encode())
        await writer.drain()
        replies.append((await reader.readline()).decode().strip())
    writer.write(b"quit\n")
    await writer.drain()
    assert await reader.read() == b""
    writer.close()
    await writer.wait_closed()
    return replies


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        results = await asyncio.wait_for(asyncio.gather(*(client(port, 5) for _ in range(20))), 30)
    assert all(r == [f"echo:MSG {i}" for i in range(5)] for r in results)
    assert len(results) == 20

    # A raw-protocol server and a big payload.
    received = bytearray()
    done = asyncio.get_running_loop().create_future()

    class Sink(asyncio.Protocol):
        def data_received(self, data):
            received.extend(data)

        def eof_received(self):
            done.set_result(len(received))

    srv = await asyncio.get_running_loop().create_server(Sink, "127.0.0.1", 0)
    p = srv.sockets[0].getsockname()[1]
    _, w = await asyncio.open_connection("127.0.0.1", p)
    w.write(b"x" * 5_000_000)
    await w.drain()
    w.write_eof()
    assert await asyncio.wait_for(done, 30) == 5_000_000
    w.close()
    srv.close()
    await srv.wait_closed()


asyncio.run(main())
print("OK asyncio_tcp")
