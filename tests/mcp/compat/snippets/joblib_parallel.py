# joblib.Parallel(n_jobs=2) with the default (loky) backend runs in more than one worker
# process; also the multiprocessing and threading backends, memory caching and dump/load.
import os
import tempfile
import time
import warnings
from pathlib import Path

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import joblib
    from joblib import Memory, Parallel, delayed

    def work(i):
        time.sleep(0.05)
        return i * i, os.getpid()

    def meet(i, rendezvous):
        """Wait (a while) until two processes have been here: both workers run at once."""
        Path(rendezvous, str(os.getpid())).touch()
        deadline = time.monotonic() + 15
        while len(os.listdir(rendezvous)) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        return i * i, os.getpid()

    rendezvous = tempfile.mkdtemp(prefix="compat_joblib_meet_", dir=os.getcwd())
    out = Parallel(n_jobs=2)(delayed(meet)(i, rendezvous) for i in range(8))
    assert [v for v, _ in out] == [i * i for i in range(8)]
    pids = {pid for _, pid in out}
    assert os.getpid() not in pids, pids
    assert len(pids) > 1, f"loky used {len(pids)} worker process(es): {pids}"

    out = Parallel(n_jobs=2, backend="multiprocessing")(delayed(work)(i) for i in range(4))
    assert [v for v, _ in out] == [0, 1, 4, 9] and os.getpid() not in {p for _, p in out}
    out = Parallel(n_jobs=4, prefer="threads")(delayed(work)(i) for i in range(8))
    assert {p for _, p in out} == {os.getpid()}
    with Parallel(n_jobs=2, return_as="generator") as parallel:
        assert sum(v for v, _ in parallel(delayed(work)(i) for i in range(4))) == 14

    work_dir = Path(tempfile.mkdtemp(prefix="compat_joblib_", dir=os.getcwd()))
    memory = Memory(work_dir / "cache", verbose=0)
    calls = []

    @memory.cache
    def expensive(x):
        calls.append(x)
        return x ** 3

    assert expensive(3) == 27 and expensive(3) == 27
    joblib.dump({"a": list(range(10))}, work_dir / "obj.joblib", compress=3)
    assert joblib.load(work_dir / "obj.joblib") == {"a": list(range(10))}

for w in caught:
    print("warning:", w.category.__name__, str(w.message)[:200])
serial = [str(w.message) for w in caught if "serial mode" in str(w.message)]
assert not serial, f"joblib fell back to serial mode: {serial}"
assert joblib.effective_n_jobs(2) == 2
print("OK joblib_parallel")
