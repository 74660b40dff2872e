# asyncio: tasks, gather, wait_for timeouts, queues, semaphores, executors, subprocesses.
import asyncio
import time


async def fetch(i, delay):
    await asyncio.sleep(delay)
    return i * 10


async def worker(name, queue, out):
    while True:
        item = await queue.get()
        try:
            out.append((name, item))
        finally:
            queue.task_done()


def blocking(x):
    time.sleep(0.05)
    return x + 1


async def main():
    t0 = time.perf_counter()
    results = await asyncio.gather(*(fetch(i, 0.1) for i in range(20)))
    assert results == [i * 10 for i in range(20)]
    assert time.perf_counter() - t0 < 1.5, "gather did not run concurrently"
    try:
        await asyncio.wait_for(asyncio.sleep(5), timeout=0.1)
    except asyncio.TimeoutError:
        pass
    else:
        raise AssertionError("no timeout")
    queue, out = asyncio.Queue(), []
    workers = [asyncio.create_task(worker(f"w{i}", queue, out)) for i in range(3)]
    for i in range(30):
        queue.put_nowait(i)
    await queue.join()
    for w in workers:
        w.cancel()
    gathered = await asyncio.gather(*workers, return_exceptions=True)
    assert all(isinstance(g, asyncio.CancelledError) for g in gathered)
    assert sorted(i for _, i in out) == list(range(30))
    sem = asyncio.Semaphore(2)
    active, peak = 0, 0

    async def limited(i):
        nonlocal active, peak
        async with sem:
            active += 1
            peak = max(peak, active)
            await asyncio.sleep(0.01)
            active -= 1

    await asyncio.gather(*(limited(i) for i in range(10)))
    assert peak == 2
    loop = asyncio.get_running_loop()
    assert await asyncio.gather(*(loop.run_in_executor(None, blocking, i) for i in range(4))) == [1, 2, 3, 4]
    assert await asyncio.to_thread(blocking, 9) == 10
    proc = await asyncio.create_subprocess_exec(
        "sh", "-c", "read x; echo got $x", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    stdout, _ = await proc.communicate(b"hello\n")
    assert proc.returncode == 0 and stdout == b"got hello\n"
    shell = await asyncio.create_subprocess_shell("echo a; sleep 0.1; echo b", stdout=asyncio.subprocess.PIPE)
    lines = [line async for line in shell.stdout]
    await shell.wait()
    assert lines == [b"a\n", b"b\n"]
    async with asyncio.TaskGroup() as tg:
        tasks = [tg.create_task(fetch(i, 0.01)) for i in range(3)]
    assert [t.result() for t in tasks] == [0, 10, 20]
    ev = asyncio.Event()
    loop.call_later(0.05, ev.set)
    await asyncio.wait_for(ev.wait(), 5)
    return "done"


assert asyncio.run(main()) == "done"
print("OK asyncio_tasks")
