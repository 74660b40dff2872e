# multiprocessing.Manager: shared dict, list, Namespace, Lock and Queue used by a Pool (fork).
import multiprocessing as mp
import os


def record(args):
    shared, log, lock, ns, i = args
    with lock:
        shared[i] = os.getpid()
        log.append(i)
        ns.total += i
    return i


with mp.Manager() as manager:
    shared = manager.dict()
    log = manager.list()
    lock = manager.Lock()
    ns = manager.Namespace()
    ns.total = 0
    q = manager.Queue()
    with mp.Pool(2) as pool:
        out = pool.map(record, [(shared, log, lock, ns, i) for i in range(20)])
    assert out == list(range(20))
    assert sorted(shared.keys()) == list(range(20)) and sorted(log) == list(range(20))
    assert ns.total == sum(range(20))
    assert os.getpid() not in set(shared.values())
    p = mp.Process(target=q.put, args=("from child",))
    p.start()
    p.join(30)
    assert q.get(timeout=10) == "from child"
    ev = manager.Event()
    ev.set()
    assert ev.is_set()
print("OK mp_manager")
