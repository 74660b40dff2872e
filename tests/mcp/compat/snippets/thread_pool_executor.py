# concurrent.futures.ThreadPoolExecutor: map, submit, as_completed, exceptions, timeouts.
import time
import threading
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, as_completed, wait


def slow_square(x):
    time.sleep(0.01)
    return x * x


def boom(x):
    raise ValueError(f"bad {x}")


t0 = time.perf_counter()
with ThreadPoolExecutor(max_workers=8, thread_name_prefix="compat") as ex:
    assert list(ex.map(slow_square, range(40))) == [x * x for x in range(40)]
    futs = {ex.submit(slow_square, x): x for x in range(10)}
    done = {futs[f]: f.result() for f in as_completed(futs, timeout=10)}
    assert done == {x: x * x for x in range(10)}
    bad = ex.submit(boom, 3)
    try:
        bad.result(timeout=5)
    except ValueError as e:
        assert str(e) == "bad 3"
    else:
        raise AssertionError("no exception")
    names = set(ex.map(lambda _: threading.current_thread().name, range(16)))
    assert all(n.startswith("compat") for n in names)
    slow = ex.submit(time.sleep, 0.5)
    fast = ex.submit(slow_square, 2)
    finished, pending = wait([slow, fast], return_when=FIRST_COMPLETED, timeout=5)
    assert fast in finished
assert time.perf_counter() - t0 < 5
print("OK thread_pool_executor")
