# multiprocessing.Process with Queue, Pipe, Event, Lock, Value and Array (fork).
import multiprocessing as mp
import os


def producer(q, n):
    for i in range(n):
        q.put({"i": i, "pid": os.getpid()})
    q.put(None)


def echo(conn):
    while True:
        msg = conn.recv()
        if msg == "bye":
            conn.send("ciao")
            conn.close()
            return
        conn.send(msg.upper())


def bump(counter, arr, lock, start, n):
    start.wait(10)
    for _ in range(n):
        with lock:
            counter.value += 1
    arr[os.getpid() % len(arr)] = 1.5


q = mp.Queue()
p = mp.Process(target=producer, args=(q, 100), name="producer")
p.start()
items = []
while (item := q.get(timeout=30)) is not None:
    items.append(item)
p.join(30)
assert p.exitcode == 0 and [x["i"] for x in items] == list(range(100))
assert {x["pid"] for x in items} == {p.pid}

parent, child = mp.Pipe()
e = mp.Process(target=echo, args=(child,))
e.start()
for word in ("a", "bc", "def"):
    parent.send(word)
    assert parent.recv() == word.upper()
parent.send("bye")
assert parent.recv() == "ciao"
e.join(30)
assert e.exitcode == 0

counter = mp.Value("i", 0)
arr = mp.Array("d", 8)
lock = mp.Lock()
start = mp.Event()
procs = [mp.Process(target=bump, args=(counter, arr, lock, start, 500)) for _ in range(3)]
for pr in procs:
    pr.start()
start.set()
for pr in procs:
    pr.join(30)
    assert pr.exitcode == 0
assert counter.value == 1500 and sum(arr[:]) > 0

jq = mp.JoinableQueue()
for i in range(5):
    jq.put(i)
done = mp.Queue()


def drain(jq, done):
    while True:
        try:
            v = jq.get(timeout=1)
        except Exception:
            return
        done.put(v * 10)
        jq.task_done()


d = mp.Process(target=drain, args=(jq, done), daemon=True)
d.start()
jq.join()
assert sorted(done.get(timeout=10) for _ in range(5)) == [0, 10, 20, 30, 40]
d.join(30)
crash = mp.Process(target=os._exit, args=(3,))
crash.start()
crash.join(30)
assert crash.exitcode == 3
print("OK mp_process_queue")
