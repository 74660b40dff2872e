# mmap: a file mapped and edited in place, and an anonymous shared mapping across fork.
import mmap
import os
import struct
import tempfile

fd, path = tempfile.mkstemp(prefix="compat_mmap_", dir=os.getcwd())
os.write(fd, b"hello world\n" + b"\0" * 4084)
os.close(fd)
with open(path, "r+b") as f:
    with mmap.mmap(f.fileno(), 0) as m:
        assert m[:5] == b"hello" and m.find(b"world") == 6
        m[:5] = b"HELLO"
        m.seek(100)
        m.write(struct.pack("<Q", 123456789))
        m.flush()
with open(path, "rb") as f:
    data = f.read()
assert data.startswith(b"HELLO world") and struct.unpack_from("<Q", data, 100)[0] == 123456789
with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as ro:
    assert ro.readline() == b"HELLO world\n"
os.unlink(path)

shared = mmap.mmap(-1, 4096, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
pid = os.fork()
if pid == 0:
    try:
        shared[:8] = struct.pack("<Q", os.getpid())
    finally:
        os._exit(0)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0
assert struct.unpack("<Q", shared[:8])[0] == pid
shared.close()
print("OK mmap_file")
