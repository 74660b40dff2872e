# asyncio datagram endpoints on the loopback: a UDP echo server and a client.
import asyncio


class Echo(asyncio.DatagramProtocol):
    def connection_made(self, transport):
        self.transport = transport

    def datagram_received(self, data, addr):
        self.transport.sendto(data[::-1], addr)


class Client(asyncio.DatagramProtocol):
    def __init__(self, n):
        self.n = n
        self.replies = []
        self.done = asyncio.get_running_loop().create_future()

    def datagram_received(self, data, addr):
        self.replies.append(data)
        if len(self.replies) == self.n and not self.done.done():
            self.done.set_result(self.replies)


async def main():
    loop = asyncio.get_running_loop()
    server, _ = await loop.create_datagram_endpoint(Echo, local_addr=("127.0.0.1", 0))
    port = server.get_extra_info("sockname")[1]
    transport, proto = await loop.create_datagram_endpoint(
        lambda: Client(50), remote_addr=("127.0.0.1", port))
    for i in range(50):
        transport.sendto(f"packet-{i:02d}".encode())
        await asyncio.sleep(0)
    replies = await asyncio.wait_for(proto.done, 10)
    assert sorted(replies) == sorted(f"packet-{i:02d}".encode()[::-1] for i in range(50))
    transport.close()
    server.close()


asyncio.run(main())
print("OK asyncio_udp")
