# The "forkserver" start method through multiprocessing.get_context, with the worker
# functions in a module of their own that the children import (as the multiprocessing
# docs ask for spawn and forkserver), written next to this code and put on sys.path.
# The main guard is what a script needs under spawn and forkserver; a notebook cell
# runs as __main__ too.
import multiprocessing as mp
import os
import sys
import textwrap

WORKER_SOURCE = textwrap.dedent('''
    import multiprocessing as mp
    import os


    def square(x):
        return x * x


    def whoami(_):
        import time
        time.sleep(0.05)
        return os.getpid(), mp.current_process().name


    def produce(q, n):
        for i in range(n):
            q.put(i * i)
        q.put(None)


    def start_method(_):
        return mp.get_start_method()
''')

if __name__ == "__main__":
    module = "compat_mpwork_forkserver"
    with open(os.path.join(os.getcwd(), module + ".py"), "w") as f:
        f.write(WORKER_SOURCE)
    sys.path.insert(0, os.getcwd())
    import importlib
    importlib.invalidate_caches()
    work = importlib.import_module(module)

    ctx = mp.get_context("forkserver")
    with ctx.Pool(2) as pool:
        assert pool.map(work.square, range(50)) == [x * x for x in range(50)]
        seen = pool.map(work.whoami, range(8), chunksize=1)
        assert os.getpid() not in {pid for pid, _ in seen}
        assert pool.apply(work.start_method, (0,)) == "forkserver"
    q = ctx.Queue()
    p = ctx.Process(target=work.produce, args=(q, 20))
    p.start()
    got = []
    while (v := q.get(timeout=60)) is not None:
        got.append(v)
    p.join(60)
    assert p.exitcode == 0 and got == [i * i for i in range(20)]
    lock = ctx.Lock()
    with lock:
        pass
    value = ctx.Value("i", 7)
    assert value.value == 7
    print("OK mp_context_forkserver")
