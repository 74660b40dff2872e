# spawn and forkserver with the worker functions and classes defined right here, next
# to the code that starts the pool, as a script writes them (the children import the
# script's __main__ again; hence the main guard a script needs under these methods).
import multiprocessing as mp
import os
from concurrent.futures import ProcessPoolExecutor


def cube(x):
    return x ** 3


class Scaler:
    def __init__(self, factor):
        self.factor = factor

    def __call__(self, x):
        return x * self.factor


def child_info(_):
    return os.getpid(), mp.current_process().name


if __name__ == "__main__":
    for method in ("spawn", "forkserver"):
        ctx = mp.get_context(method)
        with ctx.Pool(2) as pool:
            assert pool.map(cube, range(10)) == [x ** 3 for x in range(10)]
            assert pool.map(Scaler(3), [1, 2, 3]) == [3, 6, 9]
            assert os.getpid() not in {pid for pid, _ in pool.map(child_info, range(4))}
        with ProcessPoolExecutor(max_workers=2, mp_context=ctx) as ex:
            assert list(ex.map(cube, [2, 3])) == [8, 27]
            assert ex.submit(Scaler(0.5), 8).result(timeout=60) == 4.0
        q = ctx.Queue()
        p = ctx.Process(target=q.put, args=(cube(4),))
        p.start()
        assert q.get(timeout=60) == 64
        p.join(60)
        assert p.exitcode == 0, (method, p.exitcode)
    print("OK mp_spawn_local_functions")
