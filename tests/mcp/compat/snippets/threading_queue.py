# Threads: a producer/consumer queue, locks, events, conditions, barriers, timers, thread-locals.
import queue
import threading
import time

q = queue.Queue(maxsize=10)
results = []
lock = threading.Lock()
STOP = object()


def producer(n):
    for i in range(n):
        q.put(i)


def consumer():
    while True:
        item = q.get()
        try:
            if item is STOP:
                return
            with lock:
                results.append(item * item)
        finally:
            q.task_done()


consumers = [threading.Thread(target=consumer, name=f"consumer-{i}") for i in range(4)]
producers = [threading.Thread(target=producer, args=(250,)) for _ in range(2)]
for t in consumers + producers:
    t.start()
for t in producers:
    t.join()
q.join()
for _ in consumers:
    q.put(STOP)
for t in consumers:
    t.join(timeout=10)
    assert not t.is_alive()
assert len(results) == 500 and sum(results) == 2 * sum(i * i for i in range(250))

ready = threading.Event()
timer = threading.Timer(0.05, ready.set)
timer.start()
assert ready.wait(timeout=5)
barrier = threading.Barrier(3)
order = []
cond = threading.Condition()


def worker(i):
    barrier.wait(timeout=5)
    with cond:
        order.append(i)
        cond.notify_all()


ts = [threading.Thread(target=worker, args=(i,)) for i in range(3)]
for t in ts:
    t.start()
with cond:
    assert cond.wait_for(lambda: len(order) == 3, timeout=5)
for t in ts:
    t.join()
local = threading.local()
seen = {}


def remember(v):
    local.v = v
    time.sleep(0.01)
    seen[v] = local.v


ts = [threading.Thread(target=remember, args=(i,)) for i in range(5)]
for t in ts:
    t.start()
for t in ts:
    t.join()
assert seen == {i: i for i in range(5)}
pq = queue.PriorityQueue()
for p in (3, 1, 2):
    pq.put((p, f"job{p}"))
assert [pq.get()[1] for _ in range(3)] == ["job1", "job2", "job3"]
sem = threading.BoundedSemaphore(2)
with sem:
    assert sem.acquire(timeout=1)
    sem.release()
assert threading.active_count() >= 1 and threading.main_thread().is_alive()
print("OK threading_queue")
