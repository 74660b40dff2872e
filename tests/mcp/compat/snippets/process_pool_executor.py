# concurrent.futures.ProcessPoolExecutor with functions defined right here (the default
# start method on Linux, fork), as a notebook or a script does it.
import math
import os
from concurrent.futures import ProcessPoolExecutor, as_completed


def is_prime(n):
    if n < 2:
        return False
    return all(n % d for d in range(2, math.isqrt(n) + 1))


def pid_of(_):
    import time
    time.sleep(0.05)
    return os.getpid()


def fails(x):
    raise KeyError(x)


numbers = list(range(10_000, 10_400))
with ProcessPoolExecutor(max_workers=2) as ex:
    flags = list(ex.map(is_prime, numbers, chunksize=50))
    assert flags == list(map(is_prime, numbers)) and sum(flags) > 10
    pids = set(ex.map(pid_of, range(8)))
    assert os.getpid() not in pids and len(pids) >= 1
    futs = [ex.submit(pow, 2, k) for k in range(10)]
    assert sorted(f.result() for f in as_completed(futs)) == [2**k for k in range(10)]
    try:
        ex.submit(fails, "k").result(timeout=30)
    except KeyError as e:
        assert e.args == ("k",)
    else:
        raise AssertionError("no exception from the worker")
print("OK process_pool_executor")
