# /dev/shm used directly, as code that wants a RAM-backed scratch file does.
import os
import stat

assert os.path.isdir("/dev/shm")
st = os.stat("/dev/shm")
assert stat.S_IMODE(st.st_mode) & 0o1777 == 0o1777, oct(st.st_mode)
path = f"/dev/shm/compat_{os.getpid()}_scratch.bin"
payload = bytes(range(256)) * 4096  # 1 MiB
with open(path, "wb") as f:
    f.write(payload)
with open(path, "rb") as f:
    assert f.read() == payload
vfs = os.statvfs("/dev/shm")
assert vfs.f_bsize > 0 and vfs.f_bavail * vfs.f_bsize >= 16 * 1024 * 1024
assert os.path.basename(path) in os.listdir("/dev/shm")
os.unlink(path)
assert not os.path.exists(path)
# O_EXCL creation and an fd-based write, as lock files do.
lock = f"/dev/shm/compat_{os.getpid()}.lock"
fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
os.write(fd, b"locked")
try:
    os.open(lock, os.O_CREAT | os.O_EXCL | os.O_RDWR)
except FileExistsError:
    pass
else:
    raise AssertionError("O_EXCL did not refuse an existing file")
os.close(fd)
os.unlink(lock)
print("OK dev_shm_file")
