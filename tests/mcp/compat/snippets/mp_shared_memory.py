# multiprocessing.shared_memory: a SharedMemory block (and a numpy array on it) filled
# by a child, a ShareableList, and a SharedMemoryManager.
import multiprocessing as mp
from multiprocessing import shared_memory
from multiprocessing.managers import SharedMemoryManager

import numpy as np


def fill(name, n):
    shm = shared_memory.SharedMemory(name=name)
    arr = np.ndarray((n,), dtype=np.int64, buffer=shm.buf)
    arr[:] = np.arange(n) * 3
    del arr
    shm.close()


def bump_list(name):
    sl = shared_memory.ShareableList(name=name)
    sl[0] += 1
    sl[1] = "child"
    sl.shm.close()


n = 100_000
shm = shared_memory.SharedMemory(create=True, size=n * 8)
try:
    p = mp.Process(target=fill, args=(shm.name, n))
    p.start()
    p.join(30)
    assert p.exitcode == 0
    arr = np.ndarray((n,), dtype=np.int64, buffer=shm.buf)
    assert int(arr.sum()) == 3 * n * (n - 1) // 2
    del arr
finally:
    shm.close()
    shm.unlink()

sl = shared_memory.ShareableList([41, "parent", 2.5])
try:
    p = mp.Process(target=bump_list, args=(sl.shm.name,))
    p.start()
    p.join(30)
    assert p.exitcode == 0 and list(sl) == [42, "child", 2.5]
finally:
    sl.shm.close()
    sl.shm.unlink()

with SharedMemoryManager() as smm:
    block = smm.SharedMemory(size=1024)
    block.buf[:5] = b"hello"
    again = shared_memory.SharedMemory(name=block.name)
    assert bytes(again.buf[:5]) == b"hello"
    again.close()
    listed = smm.ShareableList(range(5))
    assert sum(listed) == 10
print("OK mp_shared_memory")
