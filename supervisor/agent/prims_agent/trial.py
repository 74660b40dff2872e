"""A trial load of a saved state, for a checkpoint's `not_saved`: a value
whose pickle is written but cannot be loaded (its `__reduce__` names a
callable that raises, say) is named with why when the checkpoint is made,
not only when it is restored.

The load runs in a forked child, never in the session's own interpreter:
loading runs the values' own code (`__reduce__` callables, `__setstate__`),
whose effects (a registry that counts instances, a file it writes) must
not reach the session. The child writes only to a pipe (its stdio is
/dev/null, every other descriptor closed, the channel among them), is the
first the kernel's OOM killer picks (`oom_score_adj` 1000: a small pickle
may rebuild a large value), loads only records of at most TRIAL_RECORD_MAX
bytes, and is killed after TRIAL_SECONDS. What it could not check is not
claimed either way."""

import json
import os
import select
import signal
import time

from prims_agent.text import LIST_MAX, named

TRIAL_RECORD_MAX = 1 << 20
TRIAL_SECONDS = 10.0
# The child's answer: LIST_MAX names and reasons, each short().
ANSWER_MAX = 1 << 20


def failures(path, load):
    """The `{name, why}` entries of the records in `path` that `load`
    (`load(path, failed, largest)`, which appends to `failed`) fails to
    load, as a forked child finds them; [] when the trial could not run."""
    r, w = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return []
    if pid == 0:
        _child(path, load, r, w)
    os.close(w)
    try:
        raw = _read_until(r, time.monotonic() + TRIAL_SECONDS)
    finally:
        os.close(r)
        _reap(pid)
    return _parse(raw)


def _child(path, load, r, w):
    try:
        os.close(r)
        _quiet(w)
        failed = []
        load(path, failed, TRIAL_RECORD_MAX)
        answer = [named(f["name"], f["why"]) for f in failed[:LIST_MAX]]
        os.write(w, json.dumps(answer).encode()[:ANSWER_MAX])
    finally:
        os._exit(0)


def _quiet(keep):
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.closerange(3, keep)
    os.closerange(keep + 1, 1 << 16)


def _read_until(fd, deadline):
    chunks, size = [], 0
    while size <= ANSWER_MAX:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
    return None


def _reap(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def _parse(raw):
    if not raw:
        return []
    try:
        got = json.loads(raw)
    except ValueError:
        return []
    if not isinstance(got, list):
        return []
    return [
        named(e["name"], e["why"])
        for e in got[:LIST_MAX]
        if isinstance(e, dict) and isinstance(e.get("name"), str) and isinstance(e.get("why"), str)
    ]

