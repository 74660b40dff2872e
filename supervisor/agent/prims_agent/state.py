"""A session's globals across interpreters: saved at a stop, for a fork
or a checkpoint (modules by name, the rest pickled, one record each) into a
file in the workspace, and restored into the next interpreter. The file is
read only in a jail of the session's own, or of its branch's.

Code defined in cells is carried by value with cloudpickle (from the
IPython layer, or the session's environment), as Ray, Dask and PySpark
carry it: functions, lambdas and classes. A function whose globals are the
session's `__main__` is rebuilt with the next interpreter's `__main__` as
its globals, so it sees the restored globals, and later ones, by name, and
its record never holds copies of them. Without cloudpickle, such code is
named as not saved, with why."""

import importlib
import os
import struct
import sys
import types

from prims_agent.text import LIST_MAX, named, short, why

STATE_MAGIC = b"PRIMS-STATE-1\n"
# A state record: kind (b"M" module, b"P" pickle), name length, payload length.
RECORD = struct.Struct(">cIQ")
RECORD_NAME_MAX = 1024 * 1024
VALUE_MAX_BYTES = 256 * 1024 * 1024


def not_state(name):
    """Dunders, and the output cache's `_`, `__`, `_7`, `_i`, `_i7`, `_oh`."""
    if name.startswith("__"):
        return True
    rest = name[1:] if name.startswith("_") else None
    if rest is None:
        return False
    return rest in ("", "_", "__", "i", "ii", "iii", "oh", "dh", "ih") or (
        rest.lstrip("i").isdigit() and len(rest) - len(rest.lstrip("i")) <= 1
    )


class TooLarge(Exception):
    pass


class CappedWriter:
    """A file wrapper that refuses to grow one value past VALUE_MAX_BYTES."""

    def __init__(self, f):
        self.f = f
        self.left = VALUE_MAX_BYTES

    def write(self, data):
        self.left -= memoryview(data).nbytes
        if self.left < 0:
            raise TooLarge("larger than %d MiB" % (VALUE_MAX_BYTES >> 20))
        return self.f.write(data)


def session_pickler(pickle, cloudpickle, main_globals):
    """The pickler of a session's globals: cloudpickle's, which carries
    code defined in cells by value, when there is one; else pickle's,
    which refuses that code by name."""
    if cloudpickle is None:
        return _plain_pickler(pickle)

    class SessionPickler(cloudpickle.Pickler):
        def reducer_override(self, obj):
            if type(obj) is types.FunctionType and obj.__globals__ is main_globals:
                return _main_function_reduce(obj)
            return super().reducer_override(obj)

    return SessionPickler


def _plain_pickler(pickle):
    class SessionPickler(pickle.Pickler):
        # Code defined in a cell pickles as a reference to __main__, which a
        # new interpreter cannot resolve: refuse it when saving, not later.
        def reducer_override(self, obj):
            if isinstance(obj, (type, types.FunctionType)) and getattr(obj, "__module__", None) == "__main__":
                kind = "class" if isinstance(obj, type) else "function"
                raise pickle.PicklingError(
                    "%s %s is defined in a cell, not in an importable module"
                    % (kind, getattr(obj, "__qualname__", "?"))
                )
            return NotImplemented

    return SessionPickler


class _Empty:
    """Stands for a closure cell with no value yet."""

    def __reduce__(self):
        return (_empty, ())


def _empty():
    return EMPTY


EMPTY = _Empty()


def _main_function_reduce(f):
    # A skeleton first (its cells empty) and its state after: a closure
    # that holds the function itself then pickles as a reference.
    cells = []
    for cell in f.__closure__ or ():
        try:
            cells.append(cell.cell_contents)
        except ValueError:
            cells.append(EMPTY)
    state = {
        "cells": cells,
        "defaults": f.__defaults__,
        "kwdefaults": f.__kwdefaults__,
        "qualname": f.__qualname__,
        "module": f.__module__,
        "doc": f.__doc__,
        "annotations": getattr(f, "__annotations__", None),
        "dict": dict(f.__dict__),
    }
    return (main_function, (f.__code__, f.__name__, len(cells)), state, None, None, set_main_function)


def main_function(code, name, ncells):
    """A function of `code` whose globals are this interpreter's
    `__main__`; its closure's cells are filled by `set_main_function`."""
    closure = tuple(types.CellType() for _ in range(ncells)) if ncells else None
    return types.FunctionType(code, sys.modules["__main__"].__dict__, name, None, closure)


def set_main_function(f, state):
    for cell, value in zip(f.__closure__ or (), state["cells"]):
        if value is not EMPTY:
            cell.cell_contents = value
    f.__defaults__ = state["defaults"]
    f.__kwdefaults__ = state["kwdefaults"]
    f.__qualname__ = state["qualname"]
    f.__module__ = state["module"]
    f.__doc__ = state["doc"]
    if state["annotations"] is not None:
        f.__annotations__ = state["annotations"]
    f.__dict__.update(state["dict"])


def write_record(f, pickle, pickler, name, value):
    raw_name = name.encode("utf-8", "surrogatepass")
    if isinstance(value, types.ModuleType):
        module = value.__name__
        if not isinstance(module, str):
            raise TypeError("a module without a string __name__")
        payload = module.encode("utf-8", "surrogatepass")
        f.write(RECORD.pack(b"M", len(raw_name), len(payload)) + raw_name + payload)
        return
    head = f.tell()
    f.write(RECORD.pack(b"P", len(raw_name), 0) + raw_name)
    start = f.tell()
    pickler(CappedWriter(f), protocol=5).dump(value)
    end = f.tell()
    f.seek(head)
    f.write(RECORD.pack(b"P", len(raw_name), end - start))
    f.seek(end)


def save(globals_, hidden, picklers, path, durable=True):
    """Saves what of `globals_` can be saved, but `hidden` names, to
    `path` (synced to disk when `durable`: a stop's save must outlive the
    host's crash, a fork's is read at once); the `saved` answer.
    `picklers` is (pickle, cloudpickle or None)."""
    pickle, cloudpickle = picklers
    pickler = session_pickler(pickle, cloudpickle, globals_)
    saved, skipped = [], []
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    # One name: a save cut short leaves one file, which the next save
    # or a discard replaces.
    tmp = path + ".tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        with os.fdopen(os.open(tmp, flags, 0o600), "wb") as f:
            f.write(STATE_MAGIC)
            for name, value in list(globals_.items()):
                if isinstance(name, str) and (not_state(name) or name in hidden):
                    continue
                if not isinstance(name, str):
                    skipped.append(named(repr(name), "not a string name"))
                    continue
                start = f.tell()
                try:
                    write_record(f, pickle, pickler, name, value)
                    saved.append(short(name))
                except BaseException as e:
                    f.seek(start)
                    f.truncate()
                    skipped.append(named(name, str(e) if isinstance(e, TooLarge) else why(e)))
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return {"op": "saved", "saved": saved[:LIST_MAX], "skipped": skipped[:LIST_MAX]}


def restore(globals_, pickle, path):
    """Restores what `path` holds into `globals_`, and removes it; the
    `restored` answer."""
    restored, failed = [], []
    try:
        os.unlink(path + ".tmp")
    except OSError:
        pass
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return {"op": "restored", "restored": [], "failed": []}
    try:
        with os.fdopen(fd, "rb") as f:
            if f.read(len(STATE_MAGIC)) != STATE_MAGIC:
                failed.append(named("<state file>", "not a PRIMS state file"))
            else:
                _restore_records(f, globals_, pickle, restored, failed)
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    return {"op": "restored", "restored": restored[:LIST_MAX], "failed": failed[:LIST_MAX]}


def discard(path):
    """Removes a saved state unread; the `discarded` answer."""
    for stale in (path, path + ".tmp"):
        try:
            os.unlink(stale)
        except FileNotFoundError:
            pass
    return {"op": "discarded"}


def _restore_records(f, globals_, pickle, restored, failed):
    while True:
        head = f.read(RECORD.size)
        if not head:
            return
        if len(head) < RECORD.size:
            failed.append(named("<state file>", "truncated"))
            return
        kind, name_len, payload_len = RECORD.unpack(head)
        if name_len > RECORD_NAME_MAX or payload_len > VALUE_MAX_BYTES:
            failed.append(named("<state file>", "corrupt record"))
            return
        raw_name, payload = f.read(name_len), f.read(payload_len)
        if len(raw_name) < name_len or len(payload) < payload_len:
            failed.append(named("<state file>", "truncated"))
            return
        name = raw_name.decode("utf-8", "surrogatepass")
        try:
            if kind == b"M":
                value = importlib.import_module(payload.decode("utf-8"))
            elif kind == b"P":
                value = pickle.loads(payload)
            else:
                raise ValueError("unknown record kind %r" % kind)
            globals_[name] = value
            restored.append(short(name))
        except BaseException as e:
            failed.append(named(name, why(e)))
