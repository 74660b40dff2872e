# xmlrpc: a SimpleXMLRPCServer in a thread on 127.0.0.1 and a ServerProxy client.
import threading
import xmlrpc.client
from xmlrpc.server import SimpleXMLRPCRequestHandler, SimpleXMLRPCServer


class Quiet(SimpleXMLRPCRequestHandler):
    rpc_paths = ("/RPC2",)

    def log_message(self, *args):
        pass


server = SimpleXMLRPCServer(("127.0.0.1", 0), requestHandler=Quiet, allow_none=True, logRequests=False)
server.register_introspection_functions()
server.register_multicall_functions()
server.register_function(pow)
server.register_function(lambda a, b: a + b, "add")


class Store:
    def __init__(self):
        self.items = {}

    def put(self, k, v):
        self.items[k] = v
        return len(self.items)

    def get(self, k):
        return self.items.get(k)


server.register_instance(Store())
t = threading.Thread(target=server.serve_forever, daemon=True)
t.start()
try:
    url = f"http://127.0.0.1:{server.server_address[1]}/RPC2"
    with xmlrpc.client.ServerProxy(url, allow_none=True) as proxy:
        assert proxy.pow(2, 10) == 1024
        assert proxy.add("ab", "cd") == "abcd"
        assert proxy.put("k", {"nested": [1, 2.5, None]}) == 1
        assert proxy.get("k") == {"nested": [1, 2.5, None]}
        assert "pow" in proxy.system.listMethods()
        multi = xmlrpc.client.MultiCall(proxy)
        multi.add(1, 2)
        multi.pow(3, 2)
        assert tuple(multi()) == (3, 9)
        try:
            proxy.nope()
        except xmlrpc.client.Fault as e:
            assert "nope" in e.faultString
        else:
            raise AssertionError("no fault")
finally:
    server.shutdown()
    server.server_close()
    t.join(10)
print("OK xmlrpc_loopback")
