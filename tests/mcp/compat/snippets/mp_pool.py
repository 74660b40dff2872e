# multiprocessing.Pool: map, imap_unordered, starmap, apply_async, initializer, with
# functions defined right here (the default start method on Linux, fork).
import multiprocessing as mp
import os
import time


def square(x):
    return x * x


def add(a, b):
    return a + b


def slow_pid(x):
    time.sleep(0.05)
    return os.getpid()


def init(v):
    global POOL_TAG
    POOL_TAG = v


def tag(_):
    return POOL_TAG


with mp.Pool(processes=4) as pool:
    assert pool.map(square, range(100)) == [x * x for x in range(100)]
    assert sorted(pool.imap_unordered(square, range(20), chunksize=3)) == [x * x for x in range(20)]
    assert pool.starmap(add, [(1, 2), (3, 4)]) == [3, 7]
    r = pool.apply_async(square, (12,))
    assert r.get(timeout=30) == 144
    pids = set(pool.map(slow_pid, range(16), chunksize=1))
    assert os.getpid() not in pids and len(pids) > 1, pids
with mp.Pool(2, initializer=init, initargs=("ready",)) as pool:
    assert pool.map(tag, range(4)) == ["ready"] * 4
pool = mp.Pool(2)
res = pool.map_async(square, range(10))
pool.close()
pool.join()
assert res.get() == [x * x for x in range(10)]
assert mp.cpu_count() >= 1 and mp.get_start_method() == "fork"
print("OK mp_pool")
