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
import resource
import struct
import sys
import types

from prims_agent import trial
from prims_agent.text import LIST_MAX, named, short, why

STATE_MAGIC = b"PRIMS-STATE-1\n"
# The state is one stream kept in files of at most this size (`0`, `1`,
# ...) in a directory: the jail's RLIMIT_FSIZE bounds each file, and a
# large frame's pickle is larger than that.
STRIPE_MAX = 64 * 1024 * 1024
STRIPES_MAX = 1 << 16
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


def save(globals_, hidden, picklers, path, durable=True, check=False):
    """Saves what of `globals_` can be saved, but `hidden` names, to the
    directory `path` (synced to disk when `durable`: a stop's save must
    outlive the host's crash, a fork's is read at once); the `saved`
    answer. `picklers` is (pickle, cloudpickle or None). With `check` (a
    checkpoint's save), a value that pickled but does not load again is
    named as skipped too (`trial`); its record stays, and a restore names
    it again."""
    pickle, cloudpickle = picklers
    pickler = session_pickler(pickle, cloudpickle, globals_)
    saved, skipped = [], []
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    # One name: a save cut short leaves one directory, which the next
    # save or a discard replaces.
    tmp = path + ".tmp"
    _remove(tmp)
    os.mkdir(tmp, 0o700)
    try:
        f = Stripes(tmp, _stripe_size(), writing=True)
        try:
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
            if durable:
                f.fsync()
        finally:
            f.close()
        _remove(path)
        os.rename(tmp, path)
    except BaseException:
        _remove(tmp)
        raise
    if check:
        for bad in trial.failures(path, lambda p, failed, largest: _load_all(p, pickle, failed, largest)):
            if bad["name"] in saved:
                saved.remove(bad["name"])
                skipped.append(named(bad["name"], "saved, but loading it fails: " + bad["why"]))
    return {"op": "saved", "saved": saved[:LIST_MAX], "skipped": skipped[:LIST_MAX]}


def _load_all(path, pickle, failed, largest):
    """Loads every record of `path` of at most `largest` bytes into a
    dict that is thrown away, naming those that fail in `failed`."""
    f = Stripes(path, STRIPE_MAX, writing=False)
    try:
        if f.read(len(STATE_MAGIC)) == STATE_MAGIC:
            _restore_records(f, {}, pickle, [], failed, largest)
    finally:
        f.close()


def restore(globals_, pickle, path):
    """Restores what `path` holds into `globals_`; the `restored` answer.
    The file stays (a corrupt one goes): it is the session's last save,
    which a restart after a crash restores again until a newer save
    replaces it, or the supervisor forgets it (a `fresh` interpreter)."""
    restored, failed = [], []
    _remove(path + ".tmp")
    try:
        f = Stripes(path, STRIPE_MAX, writing=False)
    except FileNotFoundError:
        return {"op": "restored", "restored": [], "failed": []}
    except (OSError, ValueError) as e:
        _remove(path)
        return {"op": "restored", "restored": [], "failed": [named("<state file>", why(e))]}
    try:
        if f.read(len(STATE_MAGIC)) != STATE_MAGIC:
            failed.append(named("<state file>", "not a PRIMS state file"))
            _remove(path)
        else:
            _restore_records(f, globals_, pickle, restored, failed)
    finally:
        f.close()
    if any(n["name"] == "<state file>" for n in failed):
        # Truncated or corrupt: what it held is restored and reported now; a
        # restart would only report the same damage again.
        _remove(path)
    return {"op": "restored", "restored": restored[:LIST_MAX], "failed": failed[:LIST_MAX]}


def discard(path):
    """Removes a saved state unread; the `discarded` answer."""
    for stale in (path, path + ".tmp"):
        _remove(stale)
    return {"op": "discarded"}


def _remove(path):
    """Removes a file, or a directory of stripes (never through a link)."""
    try:
        os.unlink(path)
        return
    except FileNotFoundError:
        return
    except IsADirectoryError:
        pass
    for name in os.listdir(path):
        os.unlink(os.path.join(path, name))
    os.rmdir(path)


def _stripe_size():
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return STRIPE_MAX
    return max(1, min(soft, STRIPE_MAX))


class Stripes:
    """One stream kept in files `0`, `1`, ... of `size` bytes each (the
    last shorter) in a directory; a file of the older layout reads as one
    stripe. Positioned reads and writes, so a record's header can be
    patched and a failed record cut off."""

    def __init__(self, path, size, writing):
        self.path, self.size = path, size
        self.fds = []
        self.pos = 0
        self.length = 0
        if writing:
            return
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(path, flags | os.O_DIRECTORY)
        except NotADirectoryError:
            # The layout before stripes: one file.
            fd = os.open(path, flags)
            self.fds = [fd]
            self.length = os.fstat(fd).st_size
            self.size = max(self.length, 1)
            return
        try:
            names = os.listdir(fd)
            if len(names) > STRIPES_MAX or set(names) != {str(i) for i in range(len(names))}:
                raise ValueError("not a PRIMS state directory")
            for i in range(len(names)):
                sfd = os.open(str(i), flags, dir_fd=fd)
                self.fds.append(sfd)
                n = os.fstat(sfd).st_size
                if i == 0:
                    self.size = max(n, 1)
                if n > self.size or (i < len(names) - 1 and n != self.size):
                    raise ValueError("a PRIMS state directory with stripes of odd sizes")
                self.length += n
        except BaseException:
            self.close()
            raise
        finally:
            os.close(fd)

    def _fd(self, i):
        while len(self.fds) <= i:
            flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            self.fds.append(os.open(os.path.join(self.path, str(len(self.fds))), flags, 0o600))
        return self.fds[i]

    def write(self, data):
        view = memoryview(data).cast("B")
        n = len(view)
        while view:
            i, off = divmod(self.pos, self.size)
            k = os.pwrite(self._fd(i), view[: self.size - off], off)
            self.pos += k
            view = view[k:]
        self.length = max(self.length, self.pos)
        return n

    def readinto(self, buf):
        view = memoryview(buf).cast("B")
        done = 0
        while done < len(view) and self.pos < self.length:
            i, off = divmod(self.pos, self.size)
            want = min(len(view) - done, self.size - off, self.length - self.pos)
            k = os.preadv(self.fds[i], [view[done : done + want]], off)
            if k <= 0:
                break
            done += k
            self.pos += k
        return done

    def read(self, n=-1):
        if n is None or n < 0:
            n = self.length - self.pos
        buf = bytearray(max(0, min(n, self.length - self.pos)))
        return bytes(buf[: self.readinto(buf)])

    def readline(self, n=-1):
        line = bytearray()
        while n is None or n < 0 or len(line) < n:
            c = self.read(1)
            if not c:
                break
            line += c
            if c == b"\n":
                break
        return bytes(line)

    def tell(self):
        return self.pos

    def seek(self, pos):
        self.pos = pos

    def truncate(self):
        """Cuts the stream at the current position."""
        i, off = divmod(self.pos, self.size)
        while len(self.fds) > i + 1:
            os.close(self.fds.pop())
            os.unlink(os.path.join(self.path, str(len(self.fds))))
        if len(self.fds) == i + 1:
            os.ftruncate(self.fds[i], off)
        self.length = self.pos

    def fsync(self):
        for fd in self.fds:
            os.fsync(fd)
        dfd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    def close(self):
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = []


def _restore_records(f, globals_, pickle, restored, failed, largest=None):
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
        raw_name = f.read(name_len)
        if len(raw_name) < name_len:
            failed.append(named("<state file>", "truncated"))
            return
        name = raw_name.decode("utf-8", "surrogatepass")
        start = f.tell()
        if largest is not None and payload_len > largest:
            f.seek(start + payload_len)
            continue
        try:
            if kind == b"M":
                payload = f.read(payload_len)
                value = importlib.import_module(payload.decode("utf-8"))
            elif kind == b"P":
                # Streamed from the file: a large value is never in memory
                # twice (its pickle and itself).
                value = pickle.Unpickler(Bounded(f, payload_len)).load()
            else:
                raise ValueError("unknown record kind %r" % kind)
            globals_[name] = value
            restored.append(short(name))
        except BaseException as e:
            failed.append(named(name, why(e)))
        f.seek(start + payload_len)
        if start + payload_len > f.length:
            failed.append(named("<state file>", "truncated"))
            return


class Bounded:
    """A reader of the next `n` bytes of `f`, for one record's pickle."""

    def __init__(self, f, n):
        self.f = f
        self.left = n

    def read(self, size=-1):
        if size is None or size < 0 or size > self.left:
            size = self.left
        data = self.f.read(size)
        self.left -= len(data)
        return data

    def readinto(self, buf):
        view = memoryview(buf)[: self.left]
        n = self.f.readinto(view)
        self.left -= n
        return n

    def readline(self, size=-1):
        if size is None or size < 0 or size > self.left:
            size = self.left
        data = self.f.readline(size)
        self.left -= len(data)
        return data
